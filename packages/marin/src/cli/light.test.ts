/**
 * What `marin --help` and `import '@marin/marin'` load: neither the model stack (tfjs),
 * the HTTP server (hono) nor the charts (vega); those load with the command or subpath that uses them.
 * Nor the dependencies the modules that use them load at first use (HTML parsing, Parquet, zstd writing,
 * language identification, YAML, pretty logs, gRPC, SQLite): every step process imports `@marin/marin`.
 * Real processes, each recording the modules it resolves.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { marinBin, start } from '../fixtures/processes.js'

const recorder = join(import.meta.dirname, '..', 'fixtures', 'record-modules.mjs')
const HEAVY = /\/node_modules\/(?:\.pnpm\/[^/]+\/node_modules\/)?(@tensorflow\/tfjs[^/]*|hono|@hono\/[^/]+|vega[^/]*)\//
const pkgOf = (re: RegExp) => (modules: string[]) => [...new Set(modules.flatMap((m) => re.exec(m)?.[1] ?? []))]
const LAZY = [
  ...['linkedom', '@mozilla/readability', 'hyparquet[^/]*', 'cld3-asm', '@bokuweb/zstd-wasm'],
  ...['yaml', 'pino-pretty', '@grpc/grpc-js', 'better-sqlite3'],
].join('|')
const lazy = pkgOf(new RegExp(`/node_modules/(?:\\.pnpm/[^/]+/node_modules/)?(${LAZY})/`))
let dir: string
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'marin-light-'))
})
afterAll(() => rmSync(dir, { recursive: true, force: true }))

/** Runs node with `args` and returns its exit, output and the module URLs it resolved. */
async function modulesOf(name: string, args: string[]) {
  const log = join(dir, `${name}.modules`)
  const env = { MODULE_LOG: log, MARIN_PREFIX: join(dir, 'prefix'), LOG_FORMAT: 'json' }
  const r = await start(['--import', recorder, ...args], env).done
  const modules = readFileSync(log, 'utf8').trim().split('\n')
  return { ...r, modules, heavy: pkgOf(HEAVY)(modules), lazy: lazy(modules) }
}

describe('light entry points', () => {
  test('marin --help lists every command without loading tfjs, hono or vega', async () => {
    const r = await modulesOf('help', [marinBin, '--help'])
    expect(r.code, r.err).toBe(0)
    for (const c of ['run', 'status', 'explain', 'ls', 'publish-report', 'eval', 'serve'])
      expect(r.out).toMatch(new RegExp(`^  ${c} `, 'm'))
    // The recorder works: the CLI's own modules are in the list.
    expect(r.modules.some((m) => m.endsWith('/src/cli/program.ts'))).toBe(true)
    expect(r.heavy).toEqual([])
    expect(r.lazy).toEqual([])
  }, 60_000)

  test('marin serve --help loads the server (the recorder sees heavy modules when they load)', async () => {
    const r = await modulesOf('serve-help', [marinBin, 'serve', '--help'])
    expect(r.code, r.err).toBe(0)
    expect(r.out).toMatch(/--model-checkpoint/)
    expect(r.heavy).toContain('hono')
  }, 60_000)

  test('a dry run plans without loading iris; the driver loads it only to run steps as jobs', async () => {
    const script = join(import.meta.dirname, '..', 'fixtures', 'three-steps.ts')
    const r = await modulesOf('dry-run', ['--import', 'tsx', script, '--dry-run'])
    expect(r.code, r.err).toBe(0)
    expect(r.out).toMatch(/^plan three_steps: 3 steps/m)
    // iris's SUBMIT_TO key (one symbol, no imports) is the only part of iris an experiment loads
    const iris = r.modules.filter((m) => m.includes('/packages/iris/'))
    expect(iris.filter((m) => !m.endsWith('/packages/iris/src/submit-to.ts'))).toEqual([])
  }, 60_000)

  test("import '@marin/marin' loads the experiment API, not tfjs, hono, vega or first-use dependencies", async () => {
    const code =
      "const m = await import('@marin/marin'); for (const n of " +
      "['Experiment', 'runExperiment', 'trainStep', 'evalStep']) if " +
      "(typeof m[n] !== 'function') throw new Error(n + ' missing')"
    const r = await modulesOf('index', ['--import', 'tsx', '--input-type=module', '-e', code])
    expect(r.code, r.err).toBe(0)
    expect(r.modules.some((m) => m.endsWith('/marin/src/index.ts'))).toBe(true)
    expect(r.heavy).toEqual([])
    expect(r.lazy).toEqual([])
  }, 60_000)
})
