/**
 * levanter across network hosts: a `{ data: 2 }` training whose two replicas run on hosts B and C (network
 * namespaces with their own addresses and folders, `@marin/rigging/net-hosts`), as iris tasks of workers there,
 * driven from host A through fray's iris backend. The replicas listen on every interface and give out the address
 * their worker registered by; their gradients are all-reduced over the link between the hosts. The losses equal the
 * one-process run's within 1e-4. A replica's host partitioned mid-training fails the step with REPLICA_FAILED naming
 * that replica, bounded by FRAY_PEER_TIMEOUT_MS (the survivor's all-reduce) and the controller's worker timeout (the
 * cut replica's task fails, and fray reports the actor dead).
 */
import { createRequire } from 'node:module'
import { dirname, join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { makeNetHosts, netHostsSupport, type NetHost, type NetHosts } from '@marin/rigging/net-hosts'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { initBackend } from '../backend.js'
import { Dataset } from '../data/dataset.js'
import { Gpt2LM } from '../models/lm.js'
import { Pipeline } from '../pipeline.js'
import { MemoryTracker } from '../trackers.js'
import { Trainer } from '../trainer.js'

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

// The driver on host A: the same training as `single` below, with its replicas on the iris workers.
const DRIVER = `
const { FrayIrisClient, withClient } = await import(${JSON.stringify(FRAY)})
const { IrisClient } = await import(${JSON.stringify(IRIS)})
const { initBackend } = await import(${JSON.stringify(src('backend.ts'))})
const { Dataset } = await import(${JSON.stringify(src('data/dataset.ts'))})
const { Gpt2LM } = await import(${JSON.stringify(src('models/lm.ts'))})
const { Pipeline } = await import(${JSON.stringify(src('pipeline.ts'))})
const { MemoryTracker } = await import(${JSON.stringify(src('trackers.ts'))})
const { Trainer } = await import(${JSON.stringify(src('trainer.ts'))})
const [controller, driverHost, config] = process.argv.slice(1)
const { cfg, tokens, trainer: t, steps } = JSON.parse(config)
const say = (o) => process.stdout.write(JSON.stringify(o) + '\\n')
await initBackend()
const iris = { controller, token: process.env.IRIS_TOKEN }
const client = new FrayIrisClient({ iris, driverHost, hostListen: '0.0.0.0' })
// Where the replicas ran: each member's actor name and the worker of its job.
const placement = async (pipeline) => {
  const iris = new IrisClient({ controller, token: process.env.IRIS_TOKEN })
  const jobs = await iris.list({ states: ['RUNNING'] })
  const workers = await Promise.all(jobs.map(async (j) => [j.name, (await iris.attempts(j.jobId)).at(-1)?.workerId]))
  iris.close()
  return { workers: Object.fromEntries(workers), members: pipeline.engine?.group.members.map((m) => m.$actor.name) }
}
const trainer = new Trainer({ ...t, mesh: { data: 2 } }, { trackers: [new MemoryTracker()] })
const dataset = Dataset.fromTokens(tokens, { evalFraction: 0 })
const pipeline = new Pipeline({ dataset, model: new Gpt2LM(cfg, 2), trainer, maxSteps: steps })
trainer.addHook(1, async (info) => {
  if (info.step === 2) say({ step: 'placed', ...(await placement(pipeline)) })
  say({ step: 'progress', n: info.step })
})
try {
  const r = await withClient(client, () => pipeline.run())
  say({ step: 'trained', losses: [...r.losses] })
} catch (e) {
  say({ step: 'failed', code: e && e.code, message: String(e && e.message || e) })
}
await Promise.race([client.shutdown(), new Promise((r) => setTimeout(r, 15000))])
process.exit(0)
`

// Replicas (iris tasks, which inherit their worker's environment) give up on a peer silent for PEER_TIMEOUT_MS; the
// controller gives up on a worker silent for WORKER_TIMEOUT_MS and fails its tasks, which fray sees as their deaths.
const PEER_TIMEOUT_MS = 2000
const WORKER_TIMEOUT_MS = 3000
const hostEnv = (h: NetHost) => ({
  MARIN_PREFIX: join(h.dir, '.marin'),
  IRIS_TOKEN: TOKEN,
  LOG_LEVEL: 'warn',
  FRAY_PEER_TIMEOUT_MS: String(PEER_TIMEOUT_MS),
})
type Placed = { workers: Record<string, string>; members: string[] }

describe.skipIf(why !== undefined)(`levanter across hosts${why ? ` (skipped: ${why})` : ''}`, () => {
  let a: NetHost
  let hosts: Record<string, NetHost>
  let controller: string
  let net: NetHosts | undefined
  afterAll(() => net?.close())
  beforeAll(async () => {
    await initBackend()
    net = makeNetHosts(3)
    const [ha, b, c] = net.hosts as [NetHost, NetHost, NetHost]
    a = ha
    hosts = { wb: b, wc: c }
    controller = `${a.address}:10000`
    const ctl = a.spawn(
      process.execPath,
      [IRIS_BIN, 'controller', '--host', a.address, '--port', '10000', '--heartbeat', '500ms'].concat([
        '--worker-timeout',
        `${WORKER_TIMEOUT_MS}ms`,
      ]),
      { env: hostEnv(a) },
    )
    await ctl.waitFor(/listening on (\S+)/, 20_000)
    // One core each: the two replicas (one core each) run one per host.
    for (const [h, id] of [
      [b, 'wb'],
      [c, 'wc'],
    ] as const)
      h.spawn(
        process.execPath,
        [IRIS_BIN, 'worker', '--controller', controller, '--worker-id', id, '--resources', 'cpu=1,memory=8G'],
        { env: hostEnv(h) },
      )
  }, 40_000)
  const drive = (steps: number) =>
    a.spawn(
      process.execPath,
      ['--import', TSX, '--input-type=module', '-e', DRIVER, controller, a.address].concat(
        JSON.stringify({ cfg: CFG, tokens: TOKENS, trainer: TRAINER, steps }),
      ),
      { env: hostEnv(a) },
    )

  test('{ data: 2 } with a replica on each of two hosts trains as one process does', async () => {
    const driver = drive(STEPS)
    const single = await new Pipeline({
      dataset: Dataset.fromTokens(TOKENS, { evalFraction: 0 }),
      model: new Gpt2LM(CFG, 2),
      trainer: new Trainer(TRAINER, { trackers: [new MemoryTracker()] }),
      maxSteps: STEPS,
    }).run()
    const m = await driver.waitFor(/^\{"step":"(trained|failed)".*$/m, 50_000).catch((e: Error) => {
      throw new Error(`${e.message}; driver stderr: ${driver.stderr().slice(-1500)}`)
    })
    const out = JSON.parse(m[0]) as { step: string; losses?: number[]; message?: string }
    expect(out.message).toBeUndefined()
    const placed = JSON.parse((await driver.waitFor(/^\{"step":"placed".*$/m, 1000))[0]) as Placed
    expect(Object.values(placed.workers).sort()).toEqual(['wb', 'wc'])
    expect(out.losses).toHaveLength(STEPS)
    out.losses!.forEach((l, i) => expect(Math.abs(l - single.losses[i]!)).toBeLessThan(1e-4))
  }, 60_000)

  test('a host cut mid-training fails the step with REPLICA_FAILED naming its replica, in bounded time', async () => {
    const driver = drive(100_000)
    const placed = JSON.parse((await driver.waitFor(/^\{"step":"placed".*$/m, 50_000))[0]) as Placed
    await driver.waitFor(/^\{"step":"progress","n":3\}$/m, 20_000)
    // Cut the host of the second replica: the first one's all-reduce stops hearing from it.
    // The job of an actor is named as fray names it: `fray-<actor name>`, other characters as '-'.
    const lost = hosts[placed.workers[`fray-${placed.members[1]}`.replace(/[^A-Za-z0-9._-]/g, '-')] ?? '']
    if (!lost) throw new Error(`no host for member 1 in ${JSON.stringify(placed)}`)
    lost.cut()
    const cutAt = Date.now()
    try {
      // Bounded by the peer timeout (the survivor's collective fails) and the worker timeout (the controller fails
      // the cut replica's task, and fray reports it dead), plus slack for a loaded machine.
      const m = await driver.waitFor(/^\{"step":"failed".*$/m, PEER_TIMEOUT_MS + WORKER_TIMEOUT_MS + 25_000)
      const out = JSON.parse(m[0]) as { code: string; message: string }
      console.log(`partitioned: ${out.code} ${Date.now() - cutAt} ms after the cut: ${out.message.slice(0, 300)}`)
      expect(out.code).toBe('REPLICA_FAILED')
      expect(out.message).toMatch(/replica 1 of 2 failed/)
      // The cause is whichever failed first: the survivor's all-reduce (naming the member and its address) or the
      // cut replica's death (naming its actor).
      const cause = [`mesh member 1 (at ${lost.address}:`, `actor ${placed.members[1]} died`]
      expect(
        cause.some((c) => out.message.includes(c)),
        out.message,
      ).toBe(true)
      expect(out.message).toContain('resume from the last checkpoint')
    } finally {
      lost.restore()
    }
  }, 60_000)
})
