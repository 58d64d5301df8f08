import { spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { afterEach, describe, expect, test } from 'vitest'
import { checkCycles, formatLoop } from './check-cycles.js'

const root = resolve(import.meta.dirname, '..')
const tsx = join(root, 'node_modules/.bin/tsx')
const temps: string[] = []
afterEach(() => {
  for (const d of temps.splice(0)) rmSync(d, { recursive: true, force: true })
})

/** A tree holding `files` under `packages/`. */
function tree(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'cycles-'))
  temps.push(dir)
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(join(dir, 'packages', name, '..'), { recursive: true })
    writeFileSync(join(dir, 'packages', name), text)
  }
  return dir
}

const run = (dir: string) => spawnSync(tsx, ['scripts/check-cycles.ts', '--root', dir], { cwd: root, encoding: 'utf8' })

describe('import cycle check', () => {
  // Parses every package (~7 s of CPU on a 2-core machine): no wait in it can hang, so a loaded machine gets more
  // time than the suite's 30 s default.
  test('levanter has no import cycle of either kind', () => {
    expect(
      checkCycles(root)
        .filter((c) => c.package === 'levanter')
        .map(formatLoop),
    ).toEqual([])
  }, 120_000)

  test('a runtime cycle fails the command with the loop and its lines', () => {
    const dir = tree({
      'p/src/a.ts': `import { b } from './b.js'\nexport const a = () => b\n`,
      'p/src/b.ts': `// b\nexport { c as b } from './deep/c.js'\n`,
      'p/src/deep/c.ts': `export const c = async () => (await import('../a.js')).a\n`,
    })
    const r = run(dir)
    expect(r.status).toBe(1)
    expect(r.stderr).toContain(
      'packages/p/src/a.ts:1: [import-cycle] p: 3 files import each other at run time: ' +
        'packages/p/src/a.ts:1 → packages/p/src/b.ts:2 → packages/p/src/deep/c.ts:1 → packages/p/src/a.ts',
    )
  })

  test('`import { type A }` loads its module under verbatimModuleSyntax, so it closes a runtime cycle', () => {
    const dir = tree({
      'p/src/a.ts': `import { type B } from './b.js'\nexport type A = B\n`,
      'p/src/b.ts': `import './a.js'\nexport type B = number\n`,
    })
    expect(checkCycles(dir).map((c) => c.kind)).toEqual(['runtime'])
  })

  test('a type-only cycle is listed and passes', () => {
    const dir = tree({
      'p/src/a.ts': `import type { B } from './b.js'\nexport const a = (b: B) => b\n`,
      'p/src/b.ts': `import { a } from './a.js'\nexport type B = Parameters<typeof a>\n`,
      'p/src/c.ts': `export type C = typeof import('./c.js')\n`,
    })
    const cycles = checkCycles(dir)
    expect(cycles.map((c) => [c.kind, formatLoop(c)])).toEqual([
      ['type-only', 'packages/p/src/a.ts:1 (type) → packages/p/src/b.ts:1 → packages/p/src/a.ts'],
      ['type-only', 'packages/p/src/c.ts:1 (type) → packages/p/src/c.ts'],
    ])
    const r = run(dir)
    expect(r.status).toBe(0)
    expect(r.stdout).toContain('import cycles: 2 type-only')
    expect(r.stdout).toContain(
      'p (2 files): packages/p/src/a.ts:1 (type) → packages/p/src/b.ts:1 → packages/p/src/a.ts',
    )
  })

  test('a DAG passes, and imports of other packages or outside src are not followed', () => {
    const dir = tree({
      'p/src/index.ts': `export { a } from './a.js'\nexport { b } from './lib/index.js'\n`,
      'p/src/a.ts': `import { b } from './lib'\nimport { q } from '@x/q'\nexport const a = b + q\n`,
      'p/src/lib/index.ts': `import '../../bench/run.js'\nexport const b = 1\n`,
      'p/bench/run.ts': `import '../src/index.js'\n`,
    })
    expect(checkCycles(dir)).toEqual([])
    const r = run(dir)
    expect(r.status).toBe(0)
    expect(r.stdout).toBe('import cycles: ok (no runtime cycle)\n')
  })
})
