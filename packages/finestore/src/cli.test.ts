import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { afterEach, expect, test } from 'vitest'
import pkg from '../package.json' with { type: 'json' }
import { parseDuration, runCli, storeLocation } from './cli.js'
import { manifestPath } from './layout.js'
import { openStore, type Store } from './store.js'
import { finestoreBin } from './test-support/child.js'
import { tempDir } from './test-support/stores.js'

let cleanups: (() => void)[] = []
afterEach(() => {
  for (const c of cleanups.reverse()) c()
  cleanups = []
})

async function prefixWithData(): Promise<{ prefix: string; store: Store }> {
  const { dir, cleanup } = tempDir()
  cleanups.push(cleanup)
  const store = await openStore({ url: pathToFileURL(join(dir, 'store')).href })
  cleanups.push(() => store.close())
  await store.commit('raw/web', async (t) => void (await t.put('dump.txt', 'raw bytes')), {
    metadata: { source: 'cc' },
  })
  await store.commit('datasets/web', async (t) => void (await t.put('part-0.jsonl', '{"text":"hi"}\n')), {
    metadata: { docs: 1 },
    config: { minLen: 3 },
    lineage: ['raw/web'],
    message: 'first clean',
  })
  await store.commit('datasets/web', async (t) => void (await t.put('part-0.jsonl', '{"text":"hello"}\n')), {
    lineage: ['raw/web@1'],
  })
  await store.tag('datasets/web@1', 'stable')
  await store.putBlob('an orphan nobody references')
  return { prefix: dir, store }
}

/** Runs the real `finestore` bin in a child process. */
const finestore = finestoreBin

test('ls, show, lineage and gc --dry-run through the bin', async () => {
  const { prefix } = await prefixWithData()
  const ls = await finestore(['ls'], { MARIN_PREFIX: prefix })
  expect(ls.code, ls.err).toBe(0)
  expect(ls.out).toMatch(/ARTIFACT\s+HEAD\s+VERSIONS\s+KIND/)
  expect(ls.out).toMatch(/datasets\/web\s+2\s+2\s+datasets/)
  expect(ls.out).toMatch(/raw\/web\s+1\s+1\s+raw/)

  const show = await finestore(['--prefix', prefix, 'show', 'datasets/web@stable'])
  expect(show.code, show.err).toBe(0)
  expect(show.out).toContain('datasets/web@1')
  expect(show.out).toContain('message:  first clean')
  expect(show.out).toContain('tags:     stable')
  expect(show.out).toContain('lineage:  raw/web@1')
  expect(show.out).toContain('config:   {"minLen":3}')
  expect(show.out).toMatch(/part-0\.jsonl\s+14 B\s+sha256:[0-9a-f]{12}/)

  const lineage = await finestore(['--prefix', prefix, 'lineage', 'raw/web', '--json'])
  expect(lineage.code, lineage.err).toBe(0)
  expect(JSON.parse(lineage.out)).toEqual({
    artifact: 'raw/web',
    version: 1,
    ancestors: [],
    descendants: [
      { artifact: 'datasets/web', version: 1, depth: 1 },
      { artifact: 'datasets/web', version: 2, depth: 1 },
    ],
  })

  const gc = await finestore(['--prefix', prefix, 'gc', '--dry-run', '--grace', '0'])
  expect(gc.code, gc.err).toBe(0)
  expect(gc.out).toMatch(/^would remove 1 blobs \(27 B\)/)
  const again = await finestore(['--prefix', prefix, 'gc', '--dry-run', '--grace', '0', '--json'])
  expect(again.code, again.err).toBe(0)
  expect(again.out, again.err).not.toBe('')
  expect(JSON.parse(again.out)).toMatchObject({ dryRun: true, deleted: [{ size: 27 }] })
}, 120_000) // several child processes, each loading TypeScript: slow on a busy machine

test('bad usage exits 2 with a message; missing things exit 1', async () => {
  const { prefix, store } = await prefixWithData()
  const unknown = await finestore(['--prefix', prefix, 'frobnicate'])
  expect(unknown.code).toBe(2)
  expect(unknown.err).toMatch(/unknown command 'frobnicate'/)
  const io = { out: [] as string[], err: [] as string[] }
  const run = (args: string[]) =>
    runCli(args, { out: (s) => io.out.push(s), err: (s) => io.err.push(s), env: { MARIN_PREFIX: prefix } })
  expect(await run(['show'])).toBe(2)
  expect(io.err.join('')).toMatch(/missing required argument 'ref'/)
  expect(await run(['show', 'datasets/web@-3'])).toBe(2)
  expect(io.err.join('')).toMatch(/reference "datasets\/web@-3" is invalid/)
  expect(await run(['gc', '--grace', 'soon'])).toBe(2)
  expect(io.err.join('')).toMatch(/--grace "soon" is not a duration/)
  expect(await run(['ls', '--bogus'])).toBe(2)
  expect(await run(['show', 'datasets/web@9'])).toBe(1)
  expect(io.err.join('')).toMatch(/datasets\/web@9 does not exist; versions are 1…2/)
  expect(
    await runCli(['ls'], { out: () => {}, err: (s) => io.err.push(s), env: { MARIN_PREFIX: join(prefix, 'nowhere') } }),
  ).toBe(1)
  expect(io.err.join('')).toMatch(/no finestore store at .*nowhere\/store/)
  // A broken manifest: that version fails clearly, the others still show.
  await store.storage.write(manifestPath('datasets/web', 2), '{oops')
  expect(await run(['show', 'datasets/web@2'])).toBe(1)
  expect(io.err.join('')).toMatch(/manifest artifacts\/datasets\/web\/versions\/2\.json is not valid JSON/)
  io.out.length = 0
  expect(await run(['show', 'datasets/web@1', '--json'])).toBe(0)
  expect(JSON.parse(io.out.join('')).version).toBe(1)
  expect(await run(['--help'])).toBe(0)
}, 120_000) // several child processes, each loading TypeScript: slow on a busy machine

test(
  'no arguments print help and exit 2; --version prints the ' +
    'package version; the prefix comes from the io env, not process.env',
  async () => {
    const io = { out: [] as string[], err: [] as string[] }
    const cli = (args: string[], env: NodeJS.ProcessEnv = {}) =>
      runCli(args, { out: (s) => io.out.push(s), err: (s) => io.err.push(s), env })
    expect(await cli([])).toBe(2)
    expect(io.err.join('')).toMatch(/Usage: finestore/)
    expect(await cli(['--version'])).toBe(0)
    expect(io.out.join('')).toBe(`${pkg.version}\n`)
    const { dir, cleanup } = tempDir()
    cleanups.push(cleanup)
    const saved = process.env.MARIN_PREFIX
    process.env.MARIN_PREFIX = join(dir, 'from-process-env')
    try {
      expect(await cli(['ls'], { MARIN_PREFIX: join(dir, 'from-io-env') })).toBe(1)
      expect(io.err.join('')).toMatch(/no finestore store at .*from-io-env\/store/)
    } finally {
      if (saved === undefined) delete process.env.MARIN_PREFIX
      else process.env.MARIN_PREFIX = saved
    }
  },
)

test('prefixes and durations', () => {
  expect(storeLocation('/data/m')).toEqual({ url: 'file:///data/m/store', localDir: '/data/m/store' })
  expect(storeLocation('memory://x/')).toEqual({ url: 'memory://x/store' })
  expect(parseDuration('0')).toBe(0)
  expect(parseDuration('1h')).toBe(3_600_000)
  expect(parseDuration('250ms')).toBe(250)
  expect(() => parseDuration('-1')).toThrow(/not a duration/)
})
