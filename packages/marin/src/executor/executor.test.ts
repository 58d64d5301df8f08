import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { Lease, configureLogging, openStorage, type Storage } from '@marin/rigging'
import { Executor, type ExecutorOptions } from './executor.js'
import { explainStep, formatExplanation } from './explain.js'
import { Experiment } from './experiment.js'
import { lockPath, readStatus, writeStatus } from './status-files.js'
import { step } from './step.js'
import { versioned } from './versioned.js'

let root: string
beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'marin-exec-'))
  configureLogging({ destination: { write: () => {} }, pretty: false })
})
afterAll(() => rmSync(root, { recursive: true, force: true }))

let n = 0
const freshPrefix = () => join(root, `p${n++}`)

/** ingest -> tokenize -> train, counting runs; `fail` names steps that throw. */
function build(o: { vocab?: number; fail?: string[]; hold?: Promise<void>; runs?: string[] } = {}) {
  const runs = o.runs ?? []
  const body = (name: string) => async () => {
    runs.push(name)
    if (name === 'tokenize' && o.hold) await o.hold
    if (o.fail?.includes(name)) throw new Error(`${name} broke`)
  }
  const ingest = step({ name: 'ingest', config: { src: versioned('brown') }, fn: body('ingest') })
  const tokenize = step({
    name: 'tokenize',
    config: { input: ingest.output(), vocab: versioned(o.vocab ?? 256) },
    fn: body('tokenize'),
  })
  const train = step({
    name: 'train',
    config: { data: tokenize.output('cache'), lr: versioned(1e-3) },
    fn: body('train'),
  })
  const exp = new Experiment({ name: 'exp', steps: [train] })
  return { ingest, tokenize, train, exp, runs }
}

const run = (prefix: string, exp: Experiment, opts: ExecutorOptions = {}) => {
  const lines: string[] = []
  return new Executor({ prefix, leaseTtlMs: 600, out: (l) => lines.push(l), ...opts })
    .run(exp)
    .then((record) => ({ record, lines }))
}
const statuses = (r: { record: { steps: readonly { name: string; status: string }[] } }) =>
  Object.fromEntries(r.record.steps.map((s) => [s.name, s.status]))

describe('executor', () => {
  test('prints the plan before any step runs, and says when each step starts before it ends', async () => {
    const lines: string[] = []
    let release!: () => void
    const hold = new Promise<void>((r) => (release = r))
    const a = build({ hold })
    const running = new Executor({ prefix: freshPrefix(), leaseTtlMs: 600, out: (l) => lines.push(l) }).run(a.exp)
    // tokenize holds: by then the plan is out, and so is the line saying tokenize started.
    for (let i = 0; i < 200 && !lines.some((l) => /… tokenize_\w+: started/.test(l)); i++)
      await new Promise((r) => setTimeout(r, 25))
    const planAt = lines.findIndex((l) => /^running exp: 3 steps/.test(l))
    const startedAt = lines.findIndex((l) => /… ingest_\w+: started/.test(l))
    expect(planAt).toBe(0)
    expect(lines.slice(1, 4).every((l) => /^ {2}run /.test(l))).toBe(true)
    expect(startedAt).toBeGreaterThan(3)
    expect(lines.some((l) => /… tokenize_\w+: started/.test(l))).toBe(true)
    expect(lines.some((l) => /SUCCESS tokenize_/.test(l))).toBe(false)
    release()
    expect((await running).status).toBe('SUCCESS')
  })

  test('runs in dependency order, skips what is done, writes status, info, logs and the record', async () => {
    const prefix = freshPrefix()
    const a = build()
    const first = await run(prefix, a.exp)
    expect(a.runs).toEqual(['ingest', 'tokenize', 'train'])
    expect(statuses(first)).toEqual({ ingest: 'SUCCESS', tokenize: 'SUCCESS', train: 'SUCCESS' })
    const tok = first.record.steps[1]!
    expect(readFileSync(join(prefix, tok.nameHash, '.executor_status'), 'utf8')).toBe('SUCCESS\n')
    const info = JSON.parse(readFileSync(join(prefix, tok.nameHash, '.executor_info'), 'utf8'))
    expect(info).toMatchObject({
      name: 'tokenize',
      version: tok.version,
      status: 'SUCCESS',
      versionedConfig: { vocab: 256 },
      dependencies: [first.record.steps[0]!.nameHash],
    })
    expect(info.config.input).toBe(join(prefix, first.record.steps[0]!.nameHash))
    expect(info.provenance.host).toBeTypeOf('string')
    const storage = await openStorage(prefix)
    const recs = []
    for await (const o of storage.list('experiments/exp/')) recs.push(o.path)
    expect(recs).toHaveLength(1)
    const rec = JSON.parse(await storage.readText(recs[0]!))
    expect(rec).toMatchObject({
      experiment: 'exp',
      status: 'SUCCESS',
      steps: [{ name: 'ingest', status: 'SUCCESS' }, {}, {}],
    })
    expect(rec.steps[0].seconds).toBeTypeOf('number')
    const logs = []
    for await (const o of storage.list(`${tok.nameHash}/logs/`)) logs.push(o.path)
    expect(logs.length).toBe(1)
    expect(await storage.readText(logs[0]!)).toContain('step succeeded')

    const b = build()
    const second = await run(prefix, b.exp)
    expect(b.runs).toEqual([])
    expect(statuses(second)).toEqual({ ingest: 'SKIPPED', tokenize: 'SKIPPED', train: 'SKIPPED' })
    expect(second.lines.join('\n')).toMatch(/skip {2}ingest_[0-9a-f]{8} +done at 20\d\d-/)
  })

  test('a failure marks dependents DEP_FAILED; the next run redoes the failed steps only', async () => {
    const prefix = freshPrefix()
    const a = build({ fail: ['tokenize'] })
    const first = await run(prefix, a.exp)
    expect(statuses(first)).toEqual({ ingest: 'SUCCESS', tokenize: 'FAILED', train: 'DEP_FAILED' })
    expect(first.record.status).toBe('FAILED')
    expect(first.record.steps[1]!.error).toMatch(/tokenize broke/)
    const storage = await openStorage(prefix)
    expect((await readStatus(storage, first.record.steps[2]!.nameHash))?.status).toBe('DEP_FAILED')

    const b = build()
    const dry = await run(prefix, b.exp, { dryRun: true })
    expect(b.runs).toEqual([])
    expect(dry.record.status).toBe('DRY_RUN')
    const plan = dry.lines.join('\n')
    expect(plan).toMatch(/skip {2}ingest_\w+ +done at /)
    expect(plan).toMatch(/run {3}tokenize_\w+ +failed at /)
    expect(plan).toMatch(/run {3}train_\w+ +a dependency failed at /)
    const second = await run(prefix, b.exp)
    expect(b.runs).toEqual(['tokenize', 'train'])
    expect(statuses(second)).toEqual({ ingest: 'SKIPPED', tokenize: 'SUCCESS', train: 'SUCCESS' })
  })

  test('config changed: dry run says so and explain names the field and dependency hashes', async () => {
    const prefix = freshPrefix()
    await run(prefix, build().exp)
    const b = build({ vocab: 512 })
    const dry = await run(prefix, b.exp, { dryRun: true })
    const plan = dry.lines.join('\n')
    expect(plan).toMatch(/skip {2}ingest_/)
    expect(plan).toMatch(
      /run {3}tokenize_\w+ +config changed \(last done: tokenize_\w{8} at .*; see `marin explain tokenize`\)/,
    )
    expect(plan).toMatch(/run {3}never ran|run {3}train_\w+ +config changed/)
    // A dry run records nothing, so explain compares the script's version (as `--script` does).
    const storage: Storage = await openStorage(prefix)
    const ex = new Executor({ prefix })
    await ex.run(b.exp) // the real run records the new versions
    const tok = formatExplanation(await explainStep(storage, 'tokenize')).join('\n')
    expect(tok).toMatch(/tokenize: current version tokenize_\w{8} \(SUCCESS at /)
    expect(tok).toMatch(/last completed other version: tokenize_\w{8}/)
    expect(tok).toMatch(/changed {2}vocab: 256 -> 512/)
    const train = formatExplanation(await explainStep(storage, 'train')).join('\n')
    expect(train).toMatch(/dependency tokenize_(\w{8}) -> tokenize_(?!\1)\w{8}/)
    expect(train).not.toMatch(/lr/)
    await expect(explainStep(storage, 'nope')).rejects.toThrow(/no step named "nope" has run under/)
  })

  test(
    '--force reruns, --run-only selects matches and what they need, ' + '--max-concurrent bounds parallelism',
    async () => {
      const prefix = freshPrefix()
      await run(prefix, build().exp)
      const f = build()
      const forced = await run(prefix, f.exp, { force: true, runOnly: 'tok' })
      expect(f.runs).toEqual(['tokenize'])
      expect(forced.lines.join('\n')).toMatch(/run {3}tokenize_\w+ +forced \(done at/)
      expect(forced.lines.join('\n')).toMatch(/skip {2}train_\w+ +done at .*not selected by --run-only/)

      const p2 = freshPrefix()
      const only = build()
      await run(p2, only.exp, { runOnly: /^tokenize$/ })
      expect(only.runs).toEqual(['ingest', 'tokenize'])

      let active = 0
      let peak = 0
      const wide = Array.from({ length: 6 }, (_, i) =>
        step({
          name: `w${i}`,
          config: { i: versioned(i) },
          fn: async () => {
            active++
            peak = Math.max(peak, active)
            await new Promise((r) => setTimeout(r, 30))
            active--
          },
        }),
      )
      await run(freshPrefix(), new Experiment({ name: 'wide', steps: wide }), { maxConcurrent: 2 })
      expect(peak).toBe(2)
      expect(() => new Executor({ maxConcurrent: 0 })).toThrow(/--max-concurrent: expected a whole number >= 1/)
      expect(() => new Executor({ runOnly: '(' })).toThrow(/--run-only: "\(" is not a regular expression/)
    },
  )

  test('a step RUNNING under a live lease is waited on; an expired lease is taken over', async () => {
    const prefix = freshPrefix()
    const storage = await openStorage(prefix)
    const probe = build()
    const plan = await new Executor({ prefix }).plan(probe.exp.steps)
    const ingestDir = plan[0]!.version.nameHash
    const tokDir = plan[1]!.version.nameHash

    // Someone else is running ingest and finishes it while we wait.
    const other = await Lease.acquire(storage, lockPath(ingestDir), { ttlMs: 5000 })
    other.keepAlive()
    await writeStatus(storage, ingestDir, 'RUNNING')
    const dry = await run(prefix, probe.exp, { dryRun: true })
    expect(dry.lines.join('\n')).toMatch(/wait {2}ingest_\w+ +running elsewhere \(.+, lease until /)
    const a = build()
    const running = run(prefix, a.exp)
    await new Promise((r) => setTimeout(r, 300))
    expect(a.runs).toEqual([])
    await writeStatus(storage, ingestDir, 'SUCCESS')
    await other.release()
    const done = await running
    expect(a.runs).toEqual(['tokenize', 'train'])
    expect(done.record.steps[0]).toMatchObject({
      status: 'SKIPPED',
      detail: expect.stringMatching(/by a concurrent run/),
    })

    // A holder that died: RUNNING with a lease nobody renews. The next run takes it over once it expires.
    const p2 = freshPrefix()
    const s2 = await openStorage(p2)
    await run(p2, build().exp, { runOnly: '^ingest$' })
    await Lease.acquire(s2, lockPath(tokDir), { ttlMs: 300, owner: 'dead-host:1:x' })
    await writeStatus(s2, tokDir, 'RUNNING')
    const b = build()
    const taken = await run(p2, b.exp)
    expect(taken.lines.join('\n')).toMatch(/wait {2}tokenize_\w+ +running elsewhere \(dead-host:1:x/)
    expect(b.runs).toEqual(['tokenize', 'train'])
    expect(statuses(taken)).toEqual({ ingest: 'SKIPPED', tokenize: 'SUCCESS', train: 'SUCCESS' })
    const dry2 = await run(p2, build().exp, { dryRun: true })
    expect(dry2.lines.join('\n')).not.toMatch(/run /)
    // Now expired for good: a RUNNING step without a live lease is planned as a takeover.
    await Lease.acquire(s2, lockPath(tokDir), { ttlMs: 1, owner: 'dead-host:1:y' })
    await writeStatus(s2, tokDir, 'RUNNING')
    await new Promise((r) => setTimeout(r, 10))
    const dry3 = await run(p2, build().exp, { dryRun: true })
    expect(dry3.lines.join('\n')).toMatch(/run {3}tokenize_\w+ +take over: RUNNING since .* but its lease expired at /)
  })

  test(
    'the output is staged and published when the function returns: a ' +
      're-run replaces it whole, executor names are refused',
    async () => {
      const prefix = freshPrefix()
      const o = { v: 1, fail: false, logs: false, staged: '', publishedDuringRun: true }
      const out = step({
        name: 'out',
        config: { k: versioned(1) },
        fn: (_c, { outputPath }) => {
          o.staged = outputPath
          mkdirSync(join(outputPath, 'dir'), { recursive: true })
          writeFileSync(join(outputPath, 'dir', `v${o.v}.txt`), `${o.v}`)
          writeFileSync(join(outputPath, `only-v${o.v}.txt`), `${o.v}`)
          if (o.logs) mkdirSync(join(outputPath, 'logs'))
          o.publishedDuringRun = existsSync(join(prefix, basename(outputPath), `only-v${o.v}.txt`))
          if (o.fail) throw new Error('out broke')
        },
      })
      const exp = new Experiment({ name: 'out', steps: [out] })
      const first = await run(prefix, exp)
      const dir = join(prefix, first.record.steps[0]!.nameHash)
      // The function wrote into a staging folder named like the step folder; nothing appeared in place before it
      // returned.
      expect(o.staged.startsWith(join(dir, '.staging'))).toBe(true)
      expect(basename(o.staged)).toBe(basename(dir))
      expect(o.publishedDuringRun).toBe(false)
      const entries = () =>
        readdirSync(dir)
          .filter((n) => !n.startsWith('.') && n !== 'logs')
          .sort()
      expect(entries()).toEqual(['dir', 'only-v1.txt'])
      expect(existsSync(join(dir, '.staging'))).toBe(false)

      o.v = 2
      await run(prefix, exp, { force: true })
      expect(entries()).toEqual(['dir', 'only-v2.txt'])
      expect(readdirSync(join(dir, 'dir'))).toEqual(['v2.txt'])
      expect(readdirSync(join(dir, 'logs'))).toHaveLength(2)

      o.v = 3
      o.fail = true
      const failed = await run(prefix, exp, { force: true })
      // A failed run's output is published with its FAILED status: what it wrote before failing explains it.
      expect(failed.record.steps[0]!.status).toBe('FAILED')
      expect(entries()).toEqual(['dir', 'only-v3.txt'])

      o.v = 4
      o.fail = false
      o.logs = true
      const refused = await run(prefix, exp, { force: true })
      expect(refused.record.steps[0]!.error).toMatch(
        /wrote "logs" into its output, a name the executor keeps for its own files/,
      )
      expect(entries()).toEqual(['dir', 'only-v3.txt'])
      expect(existsSync(join(dir, '.staging'))).toBe(false)
    },
  )
})
