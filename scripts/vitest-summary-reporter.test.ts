import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { afterAll, expect, test } from 'vitest'

const root = resolve(import.meta.dirname, '..')
const dir = mkdtempSync(join(tmpdir(), 'reporter-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

test('a run ends with one line counting passed, failed and skipped tests', () => {
  writeFileSync(
    join(dir, 'sample.test.ts'),
    [
      `import { expect, test } from 'vitest'`,
      `test('passes', () => expect(1).toBe(1))`,
      `test('passes too', () => expect(2).toBe(2))`,
      `test('fails', () => expect(1).toBe(2))`,
      `test.skip('is skipped', () => {})`,
    ].join('\n'),
  )
  writeFileSync(join(dir, 'broken.test.ts'), `import './does-not-exist.js'\n`)
  writeFileSync(
    join(dir, 'vitest.config.ts'),
    `import Summary from ${JSON.stringify(join(root, 'scripts/vitest-summary-reporter.ts'))}\n` +
      `export default { test: { reporters: [new Summary()], include: ['*.test.ts'] } }\n`,
  )
  const run = spawnSync(join(root, 'node_modules/.bin/vitest'), ['run', '--root', dir], { cwd: dir, encoding: 'utf8' })
  expect(run.status).toBe(1)
  const lines = run.stdout.trimEnd().split('\n')
  // The file that cannot load counts as one failure.
  expect(lines.at(-1)).toBe('vitest: 2 passed, 2 failed, 1 skipped')
  // Before it, the slowest files, slowest first.
  const at = lines.indexOf('slowest test files (import + tests):')
  expect(at).toBeGreaterThan(0)
  const rows = lines.slice(at + 1, at + 3)
  expect(rows.map((l) => l.trim().split(/\s+/).at(-1)).sort()).toEqual(['broken.test.ts', 'sample.test.ts'])
  for (const l of rows) expect(l).toMatch(/^\s+\d+\.\d s {2}\S+$/)
})
