/**
 * iris across network hosts: a controller on host A and workers on hosts B and C (network namespaces with their
 * own addresses and folders, `@marin/rigging/net-hosts`), all real `iris` processes. Workers register by the
 * address of their connection to the controller; a wrong --advertise is refused naming it; jobs run on both
 * hosts; a host partitioned mid-job loses its worker within the worker timeout, the job is retried and succeeds
 * on the other host, the partitioned worker's late result is refused (fenced) once the link is back, and the
 * host rejoins and runs work again. The test process talks only to host A's address, through a client on A.
 */
import { createRequire } from 'node:module'
import { join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { makeNetHosts, netHostsSupport, type HostProcess, type NetHost, type NetHosts } from '@marin/rigging/net-hosts'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { IRIS_BIN } from './internal/test-processes.js'
import type { AttemptStatus, JobStatus, LogLine, WorkerStatus } from './records.js'

const why = netHostsSupport()
if (why !== undefined) console.warn(`iris across hosts skipped: ${why}`)

const TSX = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href
const CLIENT = pathToFileURL(resolve(import.meta.dirname, 'client.ts')).href
const HEARTBEAT = '500ms'
const WORKER_TIMEOUT_MS = 3000
const TOKEN = 'hosts-test-token-0123456789'

// A client on host A: one JSON request per stdin line ({id, method, args}), one JSON answer per stdout line.
const DRIVER = `
import { createInterface } from 'node:readline'
const { IrisClient } = await import(${JSON.stringify(CLIENT)})
const c = new IrisClient({ controller: process.argv[1], token: process.env.IRIS_TOKEN, deadlineMs: 10000 })
const answer = (o) => process.stdout.write(JSON.stringify(o) + '\\n')
for await (const line of createInterface({ input: process.stdin })) {
  const { id, method, args } = JSON.parse(line)
  const run = async () => {
    if (method !== 'logs') return c[method](...args)
    const out = []
    for await (const l of c.logs(...args)) out.push(l)
    return out
  }
  run().then((result) => answer({ id, result }), (e) => answer({ id, error: String(e && e.message || e) }))
}
`

type Driver = { call<T>(method: string, ...args: unknown[]): Promise<T> }

function driver(p: HostProcess): Driver {
  let next = 0
  return {
    async call<T>(method: string, ...args: unknown[]): Promise<T> {
      const id = next++
      p.child.stdin!.write(`${JSON.stringify({ id, method, args })}\n`)
      const m = await p.waitFor(new RegExp(`^\\{"id":${id},.*$`, 'm'), 15_000)
      const a = JSON.parse(m[0]) as { result?: T; error?: string }
      if (a.error !== undefined) throw new Error(`${method}: ${a.error}`)
      return a.result as T
    },
  }
}

/** Polls `probe` until it returns a value, for at most `ms`; the error says what was awaited and the last value. */
async function until<T>(what: string, ms: number, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + ms
  let last: unknown
  for (;;) {
    const v = await probe().catch((e: unknown) => {
      last = e
      return undefined
    })
    if (v !== undefined) return v
    if (Date.now() > deadline) throw new Error(`waited ${ms} ms for ${what}; last: ${String(last)}`)
    await new Promise((r) => setTimeout(r, 250))
  }
}

const hostEnv = (h: NetHost) => ({
  MARIN_PREFIX: join(h.dir, '.marin'),
  IRIS_TOKEN: TOKEN,
  LOG_FORMAT: 'json',
  LOG_LEVEL: 'info',
})

describe.skipIf(why !== undefined)(`iris across hosts${why ? ` (skipped: ${why})` : ''}`, () => {
  let a: NetHost
  let b: NetHost
  let c: NetHost
  let controller: string
  let iris: Driver
  const workers = new Map<string, { host: NetHost; proc: HostProcess }>()

  const startWorker = (h: NetHost, id: string, extra: string[] = []) =>
    h.spawn(
      process.execPath,
      [IRIS_BIN, 'worker', '--controller', controller, '--worker-id', id, '--resources', 'cpu=1,memory=4G'].concat([
        '--retry-delay',
        '200ms',
        '--kill-grace',
        '1s',
        ...extra,
      ]),
      { env: hostEnv(h) },
    )

  let net: NetHosts | undefined
  afterAll(() => net?.close())
  beforeAll(async () => {
    net = makeNetHosts(3)
    ;[a, b, c] = net.hosts as [NetHost, NetHost, NetHost]
    controller = `${a.address}:10000`
    const ctl = a.spawn(
      process.execPath,
      // A worker silent for WORKER_TIMEOUT_MS is lost: short, so that the partition below is noticed soon.
      [IRIS_BIN, 'controller', '--host', a.address, '--port', '10000', '--heartbeat', HEARTBEAT].concat([
        '--worker-timeout',
        `${WORKER_TIMEOUT_MS}ms`,
      ]),
      { env: hostEnv(a) },
    )
    await ctl.waitFor(/listening on (\S+)/, 20_000).catch((e) => {
      throw new Error(`${e}; controller stderr: ${ctl.stderr().slice(-1000)}`)
    })
    const client = a.spawn(process.execPath, ['--import', TSX, '--input-type=module', '-e', DRIVER, controller], {
      env: hostEnv(a),
      stdin: true,
    })
    iris = driver(client)
    workers.set('wb', { host: b, proc: startWorker(b, 'wb') })
    // wb finds its address (the local end of its connection to A); wc is given its own.
    workers.set('wc', { host: c, proc: startWorker(c, 'wc', ['--advertise', c.address]) })
  }, 40_000)

  test('workers on B and C register by their own addresses (found or --advertise), not a hostname', async () => {
    const ws = await until('both workers alive', 30_000, async () => {
      const w = await iris.call<WorkerStatus[]>('workers')
      return w.filter((x) => x.state === 'ALIVE').length === 2 ? w : undefined
    })
    expect(Object.fromEntries(ws.map((w) => [w.workerId, w.address]))).toEqual({ wb: b.address, wc: c.address })
    await workers.get('wb')!.proc.waitFor(new RegExp(`registered with ${controller} as ${b.address}\\b`), 5000)
  }, 40_000)

  test('a wrong or loopback --advertise is refused, naming the address and the flag', async () => {
    const run = (adv: string) =>
      b.exec(process.execPath, [IRIS_BIN, 'worker', '--controller', controller, '--advertise', adv], {
        env: hostEnv(b),
        timeoutMs: 20_000,
      })
    // Both at once: each is a process start (most of its time), and neither depends on the other.
    const [other, loop] = await Promise.all([run(c.address), run('127.0.0.1:7000')])
    expect(other.code).toBe(2)
    expect(other.stderr).toContain(`--advertise ${c.address} is not an address of this host`)
    expect(other.stderr).toContain(b.address)
    expect(loop.code).toBe(2)
    expect(loop.stderr).toContain('--advertise 127.0.0.1:7000 is a loopback address')
  }, 40_000)

  test('jobs run on both hosts; a partitioned host loses its worker, the job is retried and succeeds on the other, ' +
    'the late result is fenced, and the host rejoins', async () => {
    const submit = (name: string, command: string, extra: Record<string, unknown> = {}) =>
      iris.call<string>('submit', {
        name,
        command: ['sh', '-c', command],
        resources: { cpu: 1, memory: 2 ** 28 },
        ...extra,
      })
    const finished = (id: string, ms: number) =>
      until(`job ${id} to finish`, ms, async () => {
        const j = await iris.call<JobStatus>('status', id)
        return ['SUCCEEDED', 'FAILED', 'KILLED', 'WORKER_FAILED', 'UNSCHEDULABLE'].includes(j.state) ? j : undefined
      })

    // One cpu each: two jobs submitted together run one on each host.
    // Each task is told the address its worker registered by (for services it offers to other hosts).
    const say = 'sleep 1; echo "$IRIS_WORKER_ID $IRIS_WORKER_HOST"'
    const both = [await submit('on-one', say), await submit('on-other', say)]
    for (const id of both) expect((await finished(id, 30_000)).state).toBe('SUCCEEDED')
    const ran = await Promise.all(both.map((id) => iris.call<AttemptStatus[]>('attempts', id)))
    expect(new Set(ran.map((at) => at[0]!.workerId))).toEqual(new Set(['wb', 'wc']))
    const said = await Promise.all(both.map((id) => iris.call<LogLine[]>('logs', id)))
    expect(said.map((ls) => ls.map((l) => l.line)).sort()).toEqual([[`wb ${b.address}`], [`wc ${c.address}`]])

    const id = await submit(
      'partitioned',
      'echo "start $IRIS_WORKER_ID"; sleep 4; echo "done $IRIS_WORKER_ID $IRIS_ATTEMPT"',
    )
    const first = await until('the attempt to run', 20_000, async () => {
      const at = await iris.call<AttemptStatus[]>('attempts', id)
      return at[0]?.state === 'RUNNING' ? at[0] : undefined
    })
    const lost = workers.get(first.workerId)!
    const kept = [...workers.keys()].find((w) => w !== first.workerId)!
    lost.host.cut()
    try {
      // Lost after WORKER_TIMEOUT_MS of silence: bounded by that plus the controller's sweep and some slack.
      const failed = await until('the cut worker to be declared lost', WORKER_TIMEOUT_MS + 10_000, async () => {
        const at = await iris.call<AttemptStatus[]>('attempts', id)
        return at[0]?.state === 'WORKER_FAILED' ? at : undefined
      })
      expect(failed[0]!.error).toMatch(new RegExp(`worker ${first.workerId} stopped heartbeating`))
      const job = await finished(id, 30_000)
      expect(job.state).toBe('SUCCEEDED')
      const attempts = await iris.call<AttemptStatus[]>('attempts', id)
      expect(attempts.map((x) => [x.attempt, x.workerId, x.state])).toEqual([
        [1, first.workerId, 'WORKER_FAILED'],
        [2, kept, 'SUCCEEDED'],
      ])
    } finally {
      lost.host.restore()
    }

    // The partitioned task finished meanwhile. Once the link is back its worker reports it (the output is kept)
    // and registers again holding it: the result is refused, the attempt stays WORKER_FAILED and the job keeps the
    // other host's result. The host rejoins with the same address and takes work again.
    const late = `done ${first.workerId} 1`
    await until('the late report to arrive', 40_000, async () => {
      const lines = await iris.call<LogLine[]>('logs', id)
      return lines.some((l) => l.line === late) ? lines : undefined
    })
    await until('the cut worker to rejoin', 30_000, async () => {
      const w = (await iris.call<WorkerStatus[]>('workers')).find((x) => x.workerId === first.workerId)
      return w?.state === 'ALIVE' ? w : undefined
    })
    const after = await iris.call<AttemptStatus[]>('attempts', id)
    expect(after.map((x) => x.state)).toEqual(['WORKER_FAILED', 'SUCCEEDED'])
    expect((await iris.call<JobStatus>('status', id)).state).toBe('SUCCEEDED')
    const again = await submit('rejoined', 'sleep 1', { replicas: 2 })
    expect((await finished(again, 30_000)).state).toBe('SUCCEEDED')
    const placed = await iris.call<AttemptStatus[]>('attempts', again)
    expect(new Set(placed.map((x) => x.workerId))).toEqual(new Set(['wb', 'wc']))
    const ws = await iris.call<WorkerStatus[]>('workers')
    expect(ws.find((w) => w.workerId === first.workerId)!.address).toBe(lost.host.address)
  }, 150_000)
})
