/**
 * @module `pnpm bench fray`: actor call round trips against a bare child_process message round
 * trip, and all-reduce of 16 MiB across 2 local members against a single memcpy (bandwidth)
 * and a bare loopback TCP transfer of the same bytes (time), into a reused result array and
 * into a new one each time; and the same reduction as a reduce-scatter then an all-gather (two
 * collectives) against the all-reduce (one); and, where network namespaces can be made (root, iproute2), the
 * all-reduce of 16 MiB between members on two network hosts (over a veth link and a bridge, TCP) against the same
 * two members on one host (linked by Unix socket), both driven from a third host.
 */
import { fork } from 'node:child_process'
import net from 'node:net'
import { createRequire } from 'node:module'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { emit, median } from '@marin/rigging/bench'
import { makeNetHosts, type NetHost, netHostsSupport } from '@marin/rigging/net-hosts'
import { actorClass } from '../src/actor.js'
import { LocalClient } from '../src/local-client.js'
import { Mesh } from '../src/mesh.js'
import type { AllReducer, Pinger } from './bench-actors.js'

const CALLS = 5_000
const RUNS = 5
const actors = new URL('./bench-actors.ts', import.meta.url)

async function bareRoundTrips(): Promise<number[]> {
  const child = fork(fileURLToPath(new URL('./echo-child.mjs', import.meta.url)), [], {
    serialization: 'advanced',
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  })
  let next: ((v: unknown) => void) | null = null
  child.on('message', (m) => next?.(m))
  const once = (id: number) =>
    new Promise((res) => {
      next = res
      child.send([1, id, 'ping', [id]])
    })
  const rates: number[] = []
  for (let r = 0; r <= RUNS; r++) {
    const t0 = performance.now()
    for (let i = 0; i < CALLS; i++) await once(i)
    if (r > 0) rates.push(CALLS / ((performance.now() - t0) / 1000)) // run 0 warms up
  }
  child.kill()
  return rates
}

async function actorRoundTrips(client: LocalClient): Promise<number[]> {
  const p = await client.createActor(actorClass<typeof Pinger>(actors, 'Pinger'), [])
  const rates: number[] = []
  for (let r = 0; r <= RUNS; r++) {
    const t0 = performance.now()
    for (let i = 0; i < CALLS; i++) await p.ping(i)
    if (r > 0) rates.push(CALLS / ((performance.now() - t0) / 1000))
  }
  await p.$actor.stop()
  return rates
}

/** Context for the all-reduce time: 16 MiB sent one way through a bare loopback TCP socket. */
async function bareTcpMs(bytes: number): Promise<number> {
  const server = net.createServer((s) => {
    let got = 0
    s.on('data', (d: Buffer) => {
      got += d.length
      if (got >= bytes) {
        got = 0
        s.write(Buffer.alloc(1))
      }
    })
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const sock = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1')
  await new Promise((r) => sock.once('connect', r))
  sock.setNoDelay(true)
  const buf = Buffer.alloc(bytes, 1)
  const times: number[] = []
  for (let i = 0; i < 11; i++) {
    const t0 = performance.now()
    sock.write(buf)
    await new Promise((r) => sock.once('data', r))
    if (i > 0) times.push(performance.now() - t0)
  }
  sock.destroy()
  server.close()
  return median(times)
}

const client = new LocalClient()
const bare: number[] = []
const ours: number[] = []
// Interleave so that both see the same machine load.
for (let i = 0; i < 3; i++) {
  bare.push(...(await bareRoundTrips()))
  ours.push(...(await actorRoundTrips(client)))
}
emit({
  bench: 'fray',
  metric: 'actor_call_round_trips_per_s',
  value: median(ours),
  unit: 'calls/s',
  baseline: median(bare),
})
// The transport of hosted (iris) actors: ducky over loopback gRPC, against the same bare IPC round trip.
const grpc = new LocalClient({ mode: 'grpc' })
emit({
  bench: 'fray',
  metric: 'actor_call_round_trips_per_s_grpc',
  value: median(await actorRoundTrips(grpc)),
  unit: 'calls/s',
  baseline: median(bare),
})
await grpc.shutdown()

// All-reduce: 16 MiB of floats over 2 members; per iteration the slowest member's time counts.
// Two ways, interleaved so that both see the same load: into a reused result array (`out`,
// what a training loop does) and into a new array each time.
const BYTES = 16 * 1024 * 1024
const group = await client.createActorGroup(actorClass<typeof AllReducer>(actors, 'AllReducer'), 2, [])
await Mesh.create(group, { data: -1 })
type Timing = { wallMs: number[]; cpuMs: number }
const slowest = (perMember: Timing[]) =>
  perMember[0]!.wallMs.map((_, i) => Math.max(...perMember.map((t) => t.wallMs[i]!)))
const reused = { ms: [] as number[], cpu: [] as number[] }
const fresh = { ms: [] as number[], cpu: [] as number[] }
const split = { ms: [] as number[], cpu: [] as number[] }
for (let r = 0; r < 3; r++) {
  for (const [into, reuse] of [
    [reused, true],
    [fresh, false],
  ] as const) {
    const perMember = await group.broadcast.timeAllReduce(BYTES / 4, 10, reuse)
    into.ms.push(...slowest(perMember))
    into.cpu.push(...perMember.map((t) => t.cpuMs))
  }
  const perMember = await group.broadcast.timeScatterGather(BYTES / 4, 10)
  split.ms.push(...slowest(perMember))
  split.cpu.push(...perMember.map((t) => t.cpuMs))
}
const ms = median(reused.ms)
// Bus bandwidth (NCCL's convention): bytes × 2(n−1)/n ÷ time; for n = 2 it is bytes ÷ time.
const busGBs = (BYTES * 2 * (2 - 1)) / 2 / (ms / 1000) / 1e9

const src = new Float32Array(BYTES / 4).fill(1)
const dst = new Float32Array(BYTES / 4)
const copies: number[] = []
for (let i = 0; i < 21; i++) {
  const t0 = performance.now()
  dst.set(src)
  copies.push(performance.now() - t0)
}
const memcpyGBs = BYTES / (median(copies.slice(1)) / 1000) / 1e9
const tcpMs = await bareTcpMs(BYTES)
emit({
  bench: 'fray',
  metric: 'allreduce_16mib_2_members_bus_bandwidth',
  value: busGBs,
  unit: 'GB/s',
  baseline: memcpyGBs,
})
emit({
  bench: 'fray',
  metric: 'allreduce_16mib_2_members_ms',
  value: ms,
  unit: 'ms',
  baseline: tcpMs,
  lowerIsBetter: true,
})
emit({
  bench: 'fray',
  metric: 'allreduce_16mib_2_members_new_array_ms',
  value: median(fresh.ms),
  unit: 'ms',
  baseline: tcpMs,
  lowerIsBetter: true,
})
// Reduce-scatter then all-gather moves the same bytes as the all-reduce: bus bandwidth by the same formula.
emit({
  bench: 'fray',
  metric: 'reducescatter_allgather_16mib_2_members_bus_bandwidth',
  value: (BYTES * 2 * (2 - 1)) / 2 / (median(split.ms) / 1000) / 1e9,
  unit: 'GB/s',
  baseline: busGBs,
})
emit({ bench: 'fray', metric: 'allreduce_16mib_cpu_ms_per_member', value: median(reused.cpu), unit: 'ms' })
emit({ bench: 'fray', metric: 'allreduce_16mib_new_array_cpu_ms_per_member', value: median(fresh.cpu), unit: 'ms' })
await client.shutdown()

// Across network hosts: the driver on host A, the members on B and C against both on A.
const why = netHostsSupport()
if (why !== undefined) process.stderr.write(`fray bench: all-reduce across hosts skipped: ${why}\n`)
else {
  const net = makeNetHosts(3)
  try {
    const [a, b, c] = net.hosts as [NetHost, NetHost, NetHost]
    const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href
    const driver = fileURLToPath(new URL('./hosts-bench-driver.ts', import.meta.url))
    const run = async (members: NetHost[]) => {
      const hosts = members.map((h) => ({ ns: h.ns, address: h.address }))
      const config = JSON.stringify({ driverHost: a.address, hosts, floats: BYTES / 4, rounds: 3 })
      const r = await a.exec(process.execPath, ['--import', tsx, driver, config], { timeoutMs: 120_000 })
      const line = r.stdout.split('\n').find((l) => l.startsWith('{"ms"'))
      if (!line) throw new Error(`fray bench: the cross-host driver failed (${r.code}): ${r.stderr.slice(-1000)}`)
      return (JSON.parse(line) as { ms: number[] }).ms
    }
    const across: number[] = []
    const oneHost: number[] = []
    for (let i = 0; i < 2; i++) {
      across.push(...(await run([b, c])))
      oneHost.push(...(await run([a, a])))
    }
    emit({
      bench: 'fray',
      metric: 'allreduce_16mib_2_hosts_ms',
      value: median(across),
      unit: 'ms',
      baseline: median(oneHost),
      lowerIsBetter: true,
    })
  } finally {
    net.close()
  }
}
