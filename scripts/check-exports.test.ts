import { spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { afterEach, describe, expect, test } from 'vitest'
import { checkExports } from './check-exports.js'

const root = resolve(import.meta.dirname, '..')
const tsx = join(root, 'node_modules/.bin/tsx')
const temps: string[] = []

/** A small repository: files by path, package.json files as objects. */
function tree(files: Record<string, string | object>): string {
  const dir = mkdtempSync(join(tmpdir(), 'exports-'))
  temps.push(dir)
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true })
    writeFileSync(join(dir, path), typeof content === 'string' ? content : JSON.stringify(content))
  }
  return dir
}

const pkg = (name: string, exports: Record<string, string> = { '.': './src/index.ts' }) => ({ name, exports })

afterEach(() => {
  for (const d of temps.splice(0)) rmSync(d, { recursive: true, force: true })
})

describe('unused-export check', () => {
  // Parses the whole repository (~8 s of CPU on a 2-core machine): no wait in it can hang, so a loaded machine
  // gets more time than the suite's 30 s default.
  test('the repository has no dead export', () => {
    expect(checkExports(root)).toEqual([])
  }, 120_000)

  test('flags a dead export with file and line, and ignores a used one', () => {
    const dir = tree({
      'packages/a/package.json': pkg('@x/a'),
      'packages/a/src/index.ts': `export { used } from './lib.js'\n`,
      'packages/a/src/lib.ts': `export const used = 1\n\nexport function dead(): number {\n  return 2\n}\n`,
      'experiments/run.ts': `import { used } from '@x/a'\nconsole.log(used)\n`,
    })
    expect(checkExports(dir).map((f) => `${f.file}:${f.line}:${f.name}`)).toEqual(['packages/a/src/lib.ts:3:dead'])
  })

  test('a name only the index re-exports is dead; one its own file uses is not', () => {
    const dir = tree({
      'packages/a/package.json': pkg('@x/a'),
      'packages/a/src/index.ts': `export { offered, helper } from './lib.js'\n`,
      'packages/a/src/lib.ts':
        `export type Options = { n: number }\nexport function helper(o: ` +
        `Options) {\n  return o.n\n}\nexport const offered = 1\n`,
    })
    expect(checkExports(dir).map((f) => f.name)).toEqual(['helper', 'offered'])
  })

  test('tests, benches, bin launchers, dynamic and namespace imports and subpath exports count as uses', () => {
    const dir = tree({
      'packages/a/package.json': pkg('@x/a', { '.': './src/index.ts', './cli': './src/cli.ts' }),
      'packages/a/src/index.ts': `export * from './all.js'\n`,
      'packages/a/src/all.ts':
        `export const viaStar = 1\nexport const viaNamespace = 2\nexport ` + `type ViaImportType = string\n`,
      'packages/a/src/cli.ts': `export function runCli() {}\n`,
      'packages/a/src/lazy.ts': `export function lazy() {}\nexport function lazyThen() {}\n`,
      'packages/a/src/tested.ts': `export const tested = 3\n`,
      'packages/a/src/user.ts': [
        `import * as all from './all.js'`,
        `export async function go(t: import('./all.js').ViaImportType) {`,
        `  const { lazy } = await import('./lazy.js')`,
        `  return [all.viaNamespace, lazy, t, go]`,
        `}`,
        `void import('./lazy.js').then((m) => m.lazyThen)`,
      ].join('\n'),
      'packages/a/src/tested.test.ts': `import { tested } from './tested.js'\nvoid tested\n`,
      'packages/a/bin/a.js': `await import('../src/cli.ts')\n`,
      'packages/a/bench/a.bench.ts':
        `import { viaStar } from '@x/a'\nimport { runCli } from ` + `'@x/a/cli'\nvoid [viaStar, runCli]\n`,
      'packages/a/src/fixtures/loaded-by-path.ts': `export default function () {}\n`,
    })
    expect(checkExports(dir)).toEqual([])
  })

  test('a public name listed with its reason is not reported', () => {
    const dir = tree({
      'packages/a/package.json': pkg('@x/a'),
      'packages/a/src/index.ts': `export { planned } from './lib.js'\n`,
      'packages/a/src/lib.ts': `export const planned = 1\n`,
    })
    expect(checkExports(dir).map((f) => f.name)).toEqual(['planned'])
    expect(checkExports(dir, { publicApi: [{ package: '@x/a', name: 'planned', reason: 'users name it' }] })).toEqual(
      [],
    )
  })

  test('the command exits 1 and names each finding', () => {
    const dir = tree({
      'packages/a/package.json': pkg('@x/a'),
      'packages/a/src/index.ts': `export const unused = 1\n`,
    })
    const run = spawnSync(tsx, ['scripts/check-exports.ts', '--root', dir], { cwd: root, encoding: 'utf8' })
    expect(run.status).toBe(1)
    expect(run.stderr).toContain(`packages/a/src/index.ts:1: [unused-export] 'unused' is exported but nothing uses it`)
  })
})
