/**
 * levanter across network hosts: a `{ data: 2 }` training (fsdp, and replicated) whose two members run on hosts B
 * and C (network namespaces with their own addresses and folders, `@marin/rigging/net-hosts`), as iris tasks of
 * workers there, driven from host A through fray's iris backend. The cluster (the object store and the controller
 * on A, a worker on B and on C) is the suite's one fixture for tests across hosts (`@marin/rigging/hosts-cluster`).
 * The members listen on every interface and give out the address their worker registered by; their collectives go
 * over the link between the hosts. The losses equal the one-process run's within 1e-4 (the same training with
 * mesh.data 1, run ahead on B's runner while A's first training starts: this process loads no training of its own).
 *
 * Partition: an fsdp run checkpointing every 2 steps into the object store on A (s3rver) is held after step 4 while
 * member 1's host is cut. Step 5 fails with REPLICA_FAILED naming member 1 (silent) and its address within
 * FRAY_PEER_TIMEOUT_MS (member 0's collective) plus levanter's MEMBER_GRACE_MS (parallel/all-members.ts), though
 * the controller gives the cut worker up only after a minute. Then what a user does with the host left: run the
 * same `{ data: 2 }` fsdp training there, its two members as processes of that host (fray's local backend: the
 * iris worker there has one core, and the controller still counts the cut one), which resumes from step 4 in the
 * store, and its steps 5..8 equal the uninterrupted run's within 1e-4.
 */
import { statSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { type HostsCluster, startHostsCluster } from '@marin/rigging/hosts-cluster'
import { type HostProcess, machineSlowdown, type NetHost, netHostsSupport } from '@marin/rigging/net-hosts'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { MEMBER_GRACE_MS } from './all-members.js'

const why = netHostsSupport()
if (why !== undefined) console.warn(`levanter across hosts skipped: ${why}`)

const require = createRequire(import.meta.url)
const TSX = pathToFileURL(require.resolve('tsx')).href
const FRAY_ENTRY = require.resolve('@marin/fray')
const FRAY = pathToFileURL(FRAY_ENTRY).href
// iris is fray's backend: its command line comes with fray.
const IRIS_ENTRY = createRequire(FRAY_ENTRY).resolve('@marin/iris')
const IRIS = pathToFileURL(IRIS_ENTRY).href
const IRIS_BIN = join(dirname(IRIS_ENTRY), '..', 'bin', 'iris.js')
const src = (p: string) => pathToFileURL(resolve(import.meta.dirname, '..', p)).href
const TOKEN = 'levanter-hosts-token-0123456789'
const STEPS = 8
const CFG = { vocabSize: 11, seqLen: 8, dModel: 16, nLayers: 1, nHeads: 2 }
const TOKENS = Array.from({ length: 1500 }, (_, i) => ((i * 3) % 10) + (i % 23 === 0 ? 1 : 0))
const TRAINER = { learningRate: 1e-2, batchSize: 4, seed: 1 }

// The runner: loads everything, prints `ready`, then runs trainings as stdin asks, one at a time, one JSON line each:
// `{"run":NAME, …config}` runs the training NAME: with `data` 1 in the runner's own process (the one-process run),
// else with mesh.data `data`, its members the iris workers' (or, with `local`, processes of the runner's own host:
// fray's local backend); `{"go":NAME}` lets
// NAME on once it paused after step `pauseAt` (its checkpoint written). Every line it prints names its run and its
// time. One runner serves a host's trainings, so that its start-up is paid once and ahead of the tests.
const RUNNER = `
const { readlinkSync } = await import('node:fs')
const { createInterface } = await import('node:readline')
const { FrayIrisClient, withClient } = await import(${JSON.stringify(FRAY)})
const { IrisClient } = await import(${JSON.stringify(IRIS)})
const { initBackend } = await import(${JSON.stringify(src('backend.ts'))})
const { Dataset } = await import(${JSON.stringify(src('data/dataset.ts'))})
const { Gpt2LM } = await import(${JSON.stringify(src('models/lm.ts'))})
const { Pipeline } = await import(${JSON.stringify(src('pipeline.ts'))})
const { MemoryTracker } = await import(${JSON.stringify(src('trackers.ts'))})
const { Trainer } = await import(${JSON.stringify(src('trainer.ts'))})
const [controller, driverHost] = process.argv.slice(1)
await initBackend()
const held = new Map()
const stopping = []
// Where the members ran: each member's actor name and the worker of its job.
const placement = async (members) => {
  const iris = new IrisClient({ controller, token: process.env.IRIS_TOKEN })
  const jobs = await iris.list({ states: ['RUNNING'] })
  const mine = new Set(members.map((m) => ('fray-' + m).replace(/[^A-Za-z0-9._-]/g, '-')))
  const workers = await Promise.all(
    jobs.filter((j) => mine.has(j.name)).map(async (j) => [j.name, (await iris.attempts(j.jobId)).at(-1)?.workerId]),
  )
  iris.close()
  return { workers: Object.fromEntries(workers), members }
}
async function train(name, { cfg, tokens, trainer: t, steps, data, fsdp, pauseAt, local }) {
  const say = (o) => process.stdout.write(JSON.stringify({ run: name, ...o, at: Date.now() }) + '\\n')
  const iris = { controller, token: process.env.IRIS_TOKEN }
  const client = data > 1 && !local ? new FrayIrisClient({ iris, driverHost, hostListen: '0.0.0.0' }) : undefined
  const trainer = new Trainer(data > 1 ? { ...t, mesh: { data }, fsdp } : t, { trackers: [new MemoryTracker()] })
  const dataset = Dataset.fromTokens(tokens, { evalFraction: 0 })
  const pipeline = new Pipeline({ dataset, model: new Gpt2LM(cfg, 2), trainer, maxSteps: steps })
  const losses = []
  trainer.addHook(1, async (info) => {
    losses.push(info.loss)
    // A mesh's members (the one-process run has none).
    const members = () => pipeline.engine.group.members
    if (info.step === 2 && client) say({ step: 'placed', ...(await placement(members().map((m) => m.$actor.name))) })
    // Each member's process and its network namespace ('net:[inode]'), at the run's first step.
    if (losses.length === 1 && local) {
      const pids = members().map((m) => m.$actor.pid())
      say({ step: 'placed', pids, nets: pids.map((p) => readlinkSync('/proc/' + p + '/ns/net')) })
    }
    say({ step: 'progress', n: info.step })
    if (info.step === pauseAt) {
      // When the engine's step rejects, before the run closes its members.
      const engine = pipeline.engine
      for (const k of ['step', 'readPending'].filter((k) => typeof engine[k] === 'function')) {
        const f = engine[k].bind(engine)
        engine[k] = (...args) =>
          f(...args).catch((e) => {
            say({ step: 'stepFailed', code: e && e.code, message: String(e && e.message || e) })
            throw e
          })
      }
      say({ step: 'paused', n: info.step })
      await new Promise((r) => held.set(name, r))
    }
  })
  try {
    const r = await (client ? withClient(client, () => pipeline.run()) : pipeline.run())
    say({ step: 'trained', losses: [...r.losses], resumedFrom: r.resumedFrom })
  } catch (e) {
    say({ step: 'failed', code: e && e.code, message: String(e && e.message || e), losses })
  }
  // The next training need not wait for this one's members to stop: its own wait for the workers' cores.
  if (client) stopping.push(Promise.race([client.shutdown(), new Promise((r) => setTimeout(r, 15000))]))
}
let queue = Promise.resolve()
process.stdout.write(JSON.stringify({ step: 'ready', at: Date.now() }) + '\\n')
for await (const text of createInterface({ input: process.stdin })) {
  const { run, go, ...config } = JSON.parse(text)
  if (go) held.get(go)?.()
  else queue = queue.then(() => train(run, config))
}
await queue
await Promise.all(stopping)
process.exit(0)
`

/** Every time limit here is for an idle machine times this (the load when the file starts: see machineSlowdown): a
 * member starved of the CPU for 2 s is no partition. */
const SLOW = machineSlowdown()
// Members (iris tasks, which inherit their worker's environment) give up on a peer silent for PEER_TIMEOUT_MS, and
// levanter fails the step MEMBER_GRACE_MS after the first member's error whatever the others do: the controller gives
// up on a worker only after WORKER_TIMEOUT_MS, far later, so a partition reported in time is levanter's own bound.
const PEER_TIMEOUT_MS = Math.round(2000 * SLOW)
const WORKER_TIMEOUT_MS = Math.round(60_000 * SLOW)
/** The partition must be reported within its bound plus this, for a loaded machine (still far below the worker's). */
const SLACK_MS = Math.round(20_000 * SLOW)
/** The store, the controller and the workers (each within its start limit, 20 s times SLOW). */
const START_MS = 70_000 * SLOW
const [TRAIN_TEST_MS, CUT_TEST_MS] = [60_000 * SLOW, 120_000 * SLOW]
const STORE = 's3://marin-test/levanter-hosts/store'
type Placed = { workers: Record<string, string>; members: string[] }
type Members = { pids: number[]; nets: string[] }
type Out = { step: string; code?: string; message?: string; at: number; losses?: number[]; resumedFrom?: number }
type Training = { data: 1 | 2; fsdp: boolean; pauseAt?: number; checkpoints?: boolean; local?: boolean }
type Runner = {
  readonly host: NetHost
  readonly p: HostProcess
  /** Starts the training `name`. */
  train(name: string, t: Training): void
  /** Lets the paused training `name` on. */
  go(name: string): void
  /** The first line of the training `name` whose step is one of `steps` (`a|b`), parsed. */
  line<T = Out>(name: string, steps: string, ms: number): Promise<T>
}

describe.skipIf(why !== undefined)(`levanter across hosts${why ? ` (skipped: ${why})` : ''}`, () => {
  let cluster: HostsCluster | undefined
  let hosts: Record<string, NetHost>
  /** Host A's runner, and one on B (where iris puts member 0, its first job, when both workers are free). */
  let onA: Runner
  let onB: Runner
  afterAll(() => cluster?.close())
  // The uninterrupted one-process run every cross-host run is held to: B's runner trains it (mesh.data 1, in the
  // runner's process), started in beforeAll.
  let single: Promise<readonly number[]> | undefined
  const reference = () =>
    (single ??= onB.line('single', 'trained|failed', 50_000 * SLOW).then((out) => {
      if (out.message !== undefined || !out.losses) throw new Error(`the one-process run failed: ${out.message}`)
      return out.losses
    }))
  /** A runner on `host`; with `local`, one whose trainings' members are its own processes, with fray's default peer
   * timeout (none): PEER_TIMEOUT_MS is for the members a partition cuts off, not for two processes of one loaded
   * machine. */
  const runner = (host: NetHost, local = false): Runner => {
    const c = cluster!
    const env = c.env(host)
    if (local) delete env.FRAY_PEER_TIMEOUT_MS
    const p = host.spawn(
      process.execPath,
      ['--import', TSX, '--input-type=module', '-e', RUNNER, c.controller, host.address],
      { env, stdin: true },
    )
    const send = (o: object) => void p.child.stdin!.write(`${JSON.stringify(o)}\n`)
    return {
      host,
      p,
      train(name, t) {
        const trainer = t.checkpoints
          ? { ...TRAINER, checkpointStore: STORE, checkpointEvery: 2, runName: 'hosts-fsdp' }
          : TRAINER
        send({ run: name, cfg: CFG, tokens: TOKENS, trainer, steps: STEPS, ...t })
      },
      go: (name) => send({ go: name }),
      async line<T>(name: string, steps: string, ms: number): Promise<T> {
        const m = await p.waitFor(new RegExp(`^\\{"run":"${name}","step":"(${steps})".*$`, 'm'), ms).catch((e) => {
          throw new Error(`${(e as Error).message}; runner stderr: ${p.stderr().slice(-1500)}`)
        })
        return JSON.parse(m[0]) as T
      },
    }
  }
  beforeAll(async () => {
    // One core a worker: the two members (one core each) run one per host.
    cluster = await startHostsCluster({
      irisBin: IRIS_BIN,
      token: TOKEN,
      workerResources: 'cpu=1,memory=8G',
      workerTimeout: `${WORKER_TIMEOUT_MS}ms`,
      env: { FRAY_PEER_TIMEOUT_MS: String(PEER_TIMEOUT_MS) },
    })
    hosts = Object.fromEntries(cluster.workers.map((w) => [w.id, w.host]))
    onA = runner(cluster.a)
    onB = runner(hosts.wb!, true)
    onB.train('single', { data: 1, fsdp: false })
  }, START_MS)
  const near = (got: readonly number[] | undefined, want: readonly number[]) => {
    expect(got).toHaveLength(want.length)
    got!.forEach((l, i) => expect(Math.abs(l - want[i]!), `step ${i + 1}`).toBeLessThan(1e-4))
  }

  test.for([
    ['fsdp', true],
    ['replicated', false],
  ] as const)(
    '{ data: 2 } %s with a member on each of two hosts trains as one process does',
    { timeout: TRAIN_TEST_MS },
    async ([name, fsdp]) => {
      onA.train(name, { data: 2, fsdp })
      const want = await reference()
      const out = await onA.line(name, 'trained|failed', 50_000 * SLOW)
      expect(out.message).toBeUndefined()
      const placed = await onA.line<Placed>(name, 'placed', 1000)
      expect(Object.values(placed.workers).sort()).toEqual(['wb', 'wc'])
      near(out.losses, want)
    },
  )

  const title = 'fsdp, a host cut mid-step: REPLICA_FAILED in bounded time; the host left resumes as { data: 2 }'
  test(
    title,
    async () => {
      const want = await reference()
      // Checkpoints every 2 steps into the store on A; held after step 4 (checkpointed) while a host is cut.
      const PAUSE = 4
      onA.train('cut', { data: 2, fsdp: true, pauseAt: PAUSE, checkpoints: true })
      const placed = await onA.line<Placed>('cut', 'placed', 50_000 * SLOW)
      // The job of an actor is named as fray names it: `fray-<actor name>`, other characters as '-'.
      const hostOf = (member: number) =>
        hosts[placed.workers[`fray-${placed.members[member]}`.replace(/[^A-Za-z0-9._-]/g, '-')] ?? '']
      const [kept, lost] = [hostOf(0), hostOf(1)]
      if (!kept || !lost) throw new Error(`no host for a member in ${JSON.stringify(placed)}`)
      // The runner of the host left (started ahead on B; on the other host should member 0 have gone there).
      const left = kept === onB.host ? onB : runner(kept, true)
      await onA.line('cut', 'paused', 30_000 * SLOW)
      lost.cut()
      const cutAt = Date.now()
      onA.go('cut')
      // The host left runs the same training again at once: the last checkpoint (step 4's) is in the store, and the
      // run cut off writes none after it. Its two members are processes of that host.
      left.train('again', { data: 2, fsdp: true, checkpoints: true, local: true })
      try {
        // Step 5 goes out: member 0's collectives hear nothing from member 1 for PEER_TIMEOUT_MS, and the step fails
        // MEMBER_GRACE_MS later at most, though member 1's task is not given up for WORKER_TIMEOUT_MS.
        const bound = PEER_TIMEOUT_MS + MEMBER_GRACE_MS
        expect(bound + SLACK_MS).toBeLessThan(WORKER_TIMEOUT_MS / 2)
        const out = await onA.line('cut', 'stepFailed|trained', bound + SLACK_MS)
        // The run then stops its members: the cut one's iris job is not heard from either, which takes longer.
        const ended = await onA.line('cut', 'failed', 60_000 * SLOW)
        console.log(
          `partitioned: ${out.code} ${out.at - cutAt} ms and the run ended ${ended.at - cutAt} ms after the cut ` +
            `(bound ${bound} ms; worker timeout ${WORKER_TIMEOUT_MS} ms): ${out.message?.slice(0, 400)}`,
        )
        expect(ended.message).toBe(out.message)
        expect(out.code).toBe('REPLICA_FAILED')
        expect(out.message).toMatch(/^mesh step: member 1 of 2 failed \(/)
        // Named as silent (behind the partition) with member 0's error, which names it and its address.
        expect(out.message).toContain(`member 1 did not answer within ${MEMBER_GRACE_MS} ms of member 0's error`)
        expect(out.message).toContain(`mesh member 1 (at ${lost.address}:`)
        expect(out.message).toContain('resume from the last checkpoint')
        near(ended.losses, want.slice(0, PAUSE))
      } finally {
        lost.restore()
      }
      // It resumed from step 4 in the store with its two members on the host left, and the steps after it are the
      // uninterrupted run's.
      const resumed = await left.line('again', 'trained|failed', 50_000 * SLOW)
      expect(resumed.message).toBeUndefined()
      expect(resumed.resumedFrom).toBe(PAUSE)
      // Two member processes, both in the network namespace of the host left.
      const members = await left.line<Members>('again', 'placed', 1000)
      expect(new Set(members.pids).size).toBe(2)
      expect(members.nets).toEqual([0, 1].map(() => `net:[${statSync(`/run/netns/${kept.ns}`).ino}]`))
      near(resumed.losses, want.slice(PAUSE))
    },
    CUT_TEST_MS,
  )
})
