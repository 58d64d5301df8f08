/**
 * Training `{ data: 2 }` with one member on each of two iris workers: a controller and its workers
 * as separate `iris` processes on loopback. A lost host (its worker and the member it runs killed
 * with SIGKILL) fails the step with REPLICA_FAILED naming the member it hosted; training resumes
 * from the last checkpoint once a new worker is there, or on the capacity that remains (a smaller
 * mesh: the checkpoint reshards).
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { Dataset, Gpt2LM, isLevanterError, MemoryTracker, Pipeline, Trainer } from '@marin/levanter'
import type { MeshEngine, TrainerConfigInput } from '@marin/levanter'
import { afterAll, beforeAll, expect, test } from 'vitest'

const IRIS = join(dirname(createRequire(import.meta.url).resolve('@marin/iris/package.json')), 'bin', 'iris.js')
const cfg = { vocabSize: 11, seqLen: 8, dModel: 16, nLayers: 1, nHeads: 2 }
const tokens = Array.from({ length: 1500 }, (_, i) => ((i * 3) % 10) + (i % 23 === 0 ? 1 : 0))

type Proc = { child: ChildProcess; out: () => string; exited: Promise<void> }
let dir: string
let controller: string
const procs: Proc[] = []
const workers = new Map<string, Proc>()

function start(args: string[], env: Record<string, string> = {}): Proc {
  const child = spawn(process.execPath, [IRIS, ...args], {
    env: { ...process.env, LOG_FORMAT: 'json', ...env },
    stdio: ['ignore', 'pipe', 'ignore'],
  })
  let out = ''
  child.stdout!.setEncoding('utf8').on('data', (c: string) => (out += c))
  const p = { child, out: () => out, exited: new Promise<void>((r) => child.once('exit', () => r())) }
  procs.push(p)
  return p
}

async function until<T>(what: string, f: () => T | undefined, ms = 60_000): Promise<T> {
  const t0 = Date.now()
  for (;;) {
    const v = f()
    if (v !== undefined) return v
    if (Date.now() - t0 > ms) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

const tokenFile = () => join(dir, 'state', 'token')

async function startWorker(id: string): Promise<void> {
  const w = start(
    [
      'worker',
      ...['--controller', controller, '--worker-id', id, '--work-dir', join(dir, 'work', id)],
      // one member's worth: each member asks for a core
      ...['--resources', 'cpu=1,memory=4G,gpu=0', '--retry-delay', '100ms', '--kill-grace', '1s'],
    ],
    { IRIS_TOKEN_FILE: tokenFile() },
  )
  await until(`worker ${id} to register`, () => (/registered with/.test(w.out()) ? true : undefined))
  workers.set(id, w)
}

/** The worker whose process tree holds `pid`. */
function workerOf(pid: number): string | undefined {
  const byPid = new Map([...workers].map(([id, w]) => [w.child.pid!, id]))
  for (let p = pid; p > 1; ) {
    const id = byPid.get(p)
    if (id) return id
    p = Number(/^PPid:\s+(\d+)/m.exec(readFileSync(`/proc/${p}/status`, 'utf8'))![1])
  }
  return undefined
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'marin-train-iris-'))
  const c = start([
    'controller',
    ...['--port', '0', '--state', join(dir, 'state', 'iris.sqlite'), '--heartbeat', '300ms', '--worker-timeout', '2s'],
  ])
  controller = await until('the controller', () => /listening on (\S+)/.exec(c.out())?.[1])
  await Promise.all([startWorker('wa'), startWorker('wb')])
}, 90_000)

afterAll(async () => {
  for (const p of procs) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGTERM')
  await Promise.all(procs.map((p) => p.exited))
  rmSync(dir, { recursive: true, force: true })
}, 30_000)

const train = (trainer: TrainerConfigInput, maxSteps: number) => {
  const t = new Trainer(
    { learningRate: 1e-2, batchSize: 4, seed: 1, schedule: { decay: 'constant' }, ...trainer },
    {
      trackers: [new MemoryTracker()],
    },
  )
  const pipeline = new Pipeline({
    dataset: Dataset.fromTokens(tokens, { evalFraction: 0 }),
    model: new Gpt2LM(cfg, 2),
    trainer: t,
    maxSteps,
  })
  return { trainer: t, pipeline }
}

test('data 2 on two iris workers: a SIGKILLed worker fails the step naming its member; training resumes', async () => {
  const reference = await train({}, 6).pipeline.run()
  const store = join(dir, 'store')
  const onIris: TrainerConfigInput = {
    mesh: { data: 2 },
    placement: { iris: { controller, tokenFile: tokenFile() } },
    checkpointStore: store,
    checkpointEvery: 1,
    runName: 'iris',
  }
  const first = train(onIris, 6)
  let hosts: (string | undefined)[] = []
  let victim = ''
  first.trainer.addHook(3, () => {
    const pids = (first.pipeline.engine as MeshEngine).pids
    hosts = pids.map(workerOf)
    victim = hosts[1]!
    // The host is lost: its worker and the member it runs die at once (a SIGKILLed worker alone
    // leaves its member running until it notices, long enough to finish and checkpoint a step).
    workers.get(victim)!.child.kill('SIGKILL')
    process.kill(pids[1]!, 'SIGKILL')
  })
  await expect(first.pipeline.run()).rejects.toSatisfy(
    (e) => isLevanterError(e, 'REPLICA_FAILED') && /replica 1 of 2 failed/.test((e as Error).message),
  )
  // One member on each worker.
  expect(new Set(hosts).size).toBe(2)
  expect(hosts.every((h) => h === 'wa' || h === 'wb')).toBe(true)
  // A new worker takes the lost one's place; the run resumes where its checkpoint left it.
  await startWorker('wc')
  const again = await train(onIris, 6).pipeline.run()
  expect(again.resumedFrom).toBe(3)
  again.losses.forEach((l, i) => expect(Math.abs(l - reference.losses[3 + i]!)).toBeLessThan(1e-4))
}, 240_000)

test('fsdp data 2 on two iris workers, one SIGKILLed: training resumes as data 1 on the worker left', async () => {
  const reference = await train({}, 6).pipeline.run()
  const live = [...workers].filter(([, w]) => w.child.exitCode === null && w.child.signalCode === null)
  expect(live).toHaveLength(2)
  const store = join(dir, 'store-remaining')
  const onIris = (data: number): TrainerConfigInput => ({
    mesh: { data },
    fsdp: true,
    placement: { iris: { controller, tokenFile: tokenFile() } },
    checkpointStore: store,
    checkpointEvery: 1,
    runName: 'iris-remaining',
  })
  const first = train(onIris(2), 6)
  let hosts: (string | undefined)[] = []
  const losses: number[] = []
  first.trainer.addHook(1, ({ loss }) => void losses.push(loss))
  first.trainer.addHook(3, () => {
    const pids = (first.pipeline.engine as MeshEngine).pids
    hosts = pids.map(workerOf)
    workers.get(hosts[1]!)!.child.kill('SIGKILL') // the host is lost: its worker and member at once
    process.kill(pids[1]!, 'SIGKILL')
  })
  await expect(first.pipeline.run()).rejects.toSatisfy(
    (e) => isLevanterError(e, 'REPLICA_FAILED') && /member 1 of 2 failed/.test((e as Error).message),
  )
  expect(new Set(hosts).size).toBe(2)
  await workers.get(hosts[1]!)!.exited
  // No new worker: the run goes on as { data: 1 }, its one member on the worker that is left, which
  // reads both members' shards of step 3.
  const again = train(onIris(1), 6)
  let host: string | undefined
  let reads: MeshEngine['shardReads'] = []
  again.trainer.addHook(6, () => {
    const e = again.pipeline.engine as MeshEngine
    host = workerOf(e.pids[0]!)
    reads = e.shardReads
  })
  const r = await again.pipeline.run()
  expect(r.resumedFrom).toBe(3)
  expect(host).toBe(hosts[0])
  expect(reads).toHaveLength(1)
  expect(reads[0]!.files).toHaveLength(4)
  ;[...losses, ...r.losses].forEach((l, i) => expect(Math.abs(l - reference.losses[i]!)).toBeLessThan(1e-4))
}, 240_000)
