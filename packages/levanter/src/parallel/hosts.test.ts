/**
 * levanter across network hosts: a `{ data: 2 }` training whose two replicas run on hosts B and C (network
 * namespaces with their own addresses and folders, `@marin/rigging/net-hosts`), as iris tasks of workers there,
 * driven from host A through fray's iris backend. The replicas listen on every interface and give out the address
 * their worker registered by; their gradients are all-reduced over the link between the hosts. The losses equal the
 * one-process run's within 1e-4.
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
const client = new FrayIrisClient({ iris: { controller, token: process.env.IRIS_TOKEN }, driverHost, hostListen: '0.0.0.0' })
try {
  const trainer = new Trainer({ ...t, mesh: { data: 2 } }, { trackers: [new MemoryTracker()] })
  const pipeline = new Pipeline({ dataset: Dataset.fromTokens(tokens, { evalFraction: 0 }), model: new Gpt2LM(cfg, 2), trainer, maxSteps: steps })
  const r = await withClient(client, () => pipeline.run())
  // Where the replicas ran: the workers of this cluster's jobs (one per replica).
  const iris = new IrisClient({ controller, token: process.env.IRIS_TOKEN })
  const jobs = await iris.list()
  const workers = (await Promise.all(jobs.map((j) => iris.attempts(j.jobId)))).map((at) => at.at(-1)?.workerId)
  iris.close()
  say({ step: 'trained', losses: [...r.losses], workers })
} catch (e) {
  say({ step: 'error', message: String(e && e.message || e) })
}
await Promise.race([client.shutdown(), new Promise((r) => setTimeout(r, 15000))])
process.exit(0)
`

const hostEnv = (h: NetHost) => ({ MARIN_PREFIX: join(h.dir, '.marin'), IRIS_TOKEN: TOKEN, LOG_LEVEL: 'warn' })

describe.skipIf(why !== undefined)(`levanter across hosts${why ? ` (skipped: ${why})` : ''}`, () => {
  let a: NetHost
  let controller: string
  let net: NetHosts | undefined
  afterAll(() => net?.close())
  beforeAll(async () => {
    await initBackend()
    net = makeNetHosts(3)
    const [ha, b, c] = net.hosts as [NetHost, NetHost, NetHost]
    a = ha
    controller = `${a.address}:10000`
    const ctl = a.spawn(process.execPath, [IRIS_BIN, 'controller', '--host', a.address, '--port', '10000'], {
      env: hostEnv(a),
    })
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

  test('{ data: 2 } with a replica on each of two hosts trains as one process does', async () => {
    const config = JSON.stringify({ cfg: CFG, tokens: TOKENS, trainer: TRAINER, steps: STEPS })
    const driver = a.spawn(
      process.execPath,
      ['--import', TSX, '--input-type=module', '-e', DRIVER, controller, a.address, config],
      { env: hostEnv(a) },
    )
    const single = await new Pipeline({
      dataset: Dataset.fromTokens(TOKENS, { evalFraction: 0 }),
      model: new Gpt2LM(CFG, 2),
      trainer: new Trainer(TRAINER, { trackers: [new MemoryTracker()] }),
      maxSteps: STEPS,
    }).run()
    const m = await driver.waitFor(/^\{"step":"(trained|error)".*$/m, 50_000).catch((e: Error) => {
      throw new Error(`${e.message}; driver stderr: ${driver.stderr().slice(-1500)}`)
    })
    const out = JSON.parse(m[0]) as { step: string; losses?: number[]; workers?: string[]; message?: string }
    expect(out.message).toBeUndefined()
    expect(out.workers?.sort()).toEqual(['wb', 'wc'])
    expect(out.losses).toHaveLength(STEPS)
    out.losses!.forEach((l, i) => expect(Math.abs(l - single.losses[i]!)).toBeLessThan(1e-4))
  }, 60_000)
})
