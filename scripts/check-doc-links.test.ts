import { spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { afterEach, describe, expect, test } from 'vitest'
import { checkDocLinks } from './check-doc-links.js'

const root = resolve(import.meta.dirname, '..')
const tsx = join(root, 'node_modules/.bin/tsx')
const temps: string[] = []

function tree(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'doc-links-'))
  temps.push(dir)
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true })
    writeFileSync(join(dir, path), content)
  }
  return dir
}

afterEach(() => {
  for (const d of temps.splice(0)) rmSync(d, { recursive: true, force: true })
})

describe('doc link check', () => {
  test('the repository docs point only at files in it', () => {
    expect(checkDocLinks(root)).toEqual([])
  })

  test('links and named paths that resolve pass; missing ones are reported with file and line', () => {
    const dir = tree({
      'docs/guide.md': [
        '# Guide',
        'See [the ops guide](../packages/a/OPS.md#security) and [the package](../packages/a).',
        'The code lives in `packages/a/src/main.ts`; tests are `*.test.ts`; run `tsx experiments/x.ts`.',
        'Read [the old notes](./NOTES.md), `packages/a/src/gone.ts` and STYLE.md.',
        '[the site](https://example.com/missing.md) and [a section](#guide)',
        '```',
        'cat packages/a/not-checked.ts',
        '```',
      ].join('\n'),
      'packages/a/OPS.md': 'Back to [the guide](../../docs/guide.md).\n',
      'packages/a/src/main.ts': 'export {}\n',
    })
    expect(checkDocLinks(dir).map((b) => `${b.file}:${b.line}:${b.target}`)).toEqual([
      'docs/guide.md:4:./NOTES.md',
      'docs/guide.md:4:packages/a/src/gone.ts',
      'docs/guide.md:4:STYLE.md',
    ])
  })

  test('the command exits 1 and names each broken link', () => {
    const dir = tree({ 'README.md': 'See [the design](docs/design.md).\n' })
    const run = spawnSync(tsx, ['scripts/check-doc-links.ts', '--root', dir], { cwd: root, encoding: 'utf8' })
    expect(run.status).toBe(1)
    expect(run.stderr).toContain(`README.md:1: links to 'docs/design.md', which is not in the repository`)
  })
})
