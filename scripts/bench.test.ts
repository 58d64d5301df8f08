import { spawnSync } from 'node:child_process'
import { join, resolve } from 'node:path'
import { describe, expect, test } from 'vitest'

const root = resolve(import.meta.dirname, '..')
const bench = (...args: string[]) =>
  spawnSync(process.execPath, ['--import', 'tsx', join(root, 'scripts/bench.ts'), ...args], {
    cwd: root,
    encoding: 'utf8',
  })

describe('pnpm bench', () => {
  test('--help prints usage and the benchmarks, and exits 0 without running any', () => {
    const r = bench('--help')
    expect(r.status).toBe(0)
    expect(r.stdout).toMatch(/^usage: pnpm bench \[name…\]/)
    expect(r.stdout).toContain('levanter/levanter')
    expect(r.stderr).not.toContain('bench: packages/')
  })

  test('an unknown option or name exits 2 and says why', () => {
    const flag = bench('--fast')
    expect(flag.status).toBe(2)
    expect(flag.stderr).toContain('unknown option --fast')
    const name = bench('no-such-benchmark')
    expect(name.status).toBe(2)
    expect(name.stderr).toContain('no benchmark matches no-such-benchmark')
  })
})
