/**
 * @module `pnpm bench fray` across network hosts over a slow link (where network namespaces can be made: root,
 * iproute2; skipped saying why elsewhere). The driver on host A, two members on hosts B and C whose link passes
 * rigging's delaying relay (`delayLink`, a fixed one-way delay of 0, 1 or 10 ms; the kernel here has no netem):
 *
 * - all-reduce of 16 MiB at each delay and with no relay, against the same two members on one host (Unix socket);
 * - the gradients of the quickstart model (GPT-2, vocab 512, context 128, d_model 128, 2 layers: 28 tensors,
 *   478,720 floats) all-reduced as one flat buffer, one tensor at a time, every tensor at once, and in 256 KiB
 *   buckets, with no relay and at 10 ms: what latency costs each pattern (ratio = one flat all-reduce's time ÷ it).
 *
 * HOSTS_BENCH_ITERS sets the timed all-reduces per configuration @default 10.
 */
import { createRequire } from 'node:module'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { emit, median } from '@marin/rigging/bench'
import { delayLink, makeNetHosts, type NetHost, netHostsSupport } from '@marin/rigging/net-hosts'
import type { GradPattern } from './hosts-bench-actors.js'

const raw = process.env.HOSTS_BENCH_ITERS
const ITERS = raw ? Number(raw) : 10
if (!(Number.isInteger(ITERS) && ITERS >= 1)) {
  process.stderr.write(`fray hosts bench: HOSTS_BENCH_ITERS must be a whole number ≥ 1, got "${raw}"\n`)
  process.exit(2)
}
const BYTES = 16 * 2 ** 20
const DELAYS = [0, 1, 10]
/** The quickstart model's tensors, in floats (experiments/quickstart.ts; the head is tied to the embedding). */
const D = 128
const LAYER = [D, D, D * 3 * D, 3 * D, D * D, D, D, D, D * 4 * D, 4 * D, 4 * D * D, D]
const SIZES = [512 * D, 128 * D, ...LAYER, ...LAYER, D, D]
const BUCKET_FLOATS = (256 * 1024) / 4

const why = netHostsSupport()
if (why !== undefined) {
  process.stderr.write(`fray hosts bench: skipped: ${why}\n`)
  process.exit(0)
}
const net = makeNetHosts(3)
try {
  const [a, b, c] = net.hosts as [NetHost, NetHost, NetHost]
  const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href
  const driver = fileURLToPath(new URL('./hosts-bench-driver.ts', import.meta.url))
  // Members listen on every interface so that a relay reaches them at their host's second address.
  const member = (h: NetHost) => ({ ns: h.ns, address: h.address, env: { FRAY_LISTEN_HOST: '0.0.0.0' } })
  const run = async <T>(members: NetHost[], extra: Record<string, unknown>): Promise<T> => {
    const config = JSON.stringify({ driverHost: a.address, hosts: members.map(member), rounds: 1, ...extra })
    const r = await a.exec(process.execPath, ['--import', tsx, driver, config], { timeoutMs: 180_000 })
    const line = r.stdout.split('\n').find((l) => l.startsWith('{'))
    if (!line) throw new Error(`fray hosts bench: the driver failed (${r.code}): ${r.stderr.slice(-1000)}`)
    return JSON.parse(line) as T
  }
  const allReduce = async (members: NetHost[]) =>
    median((await run<{ ms: number[] }>(members, { floats: BYTES / 4 })).ms)
  const grads = (members: NetHost[]) =>
    run<{ patterns: Record<GradPattern, number[]>; buckets: number }>(members, {
      sizes: SIZES,
      bucketFloats: BUCKET_FLOATS,
      rounds: ITERS,
    })

  const oneHost = await allReduce([a, a])
  const direct = await allReduce([b, c])
  emit({
    bench: 'fray',
    metric: 'allreduce_16mib_2_hosts_no_relay_ms',
    value: direct,
    unit: 'ms',
    baseline: oneHost,
    lowerIsBetter: true,
  })
  const at: Record<string, Awaited<ReturnType<typeof grads>>> = { no_relay: await grads([b, c]) }
  for (const delay of DELAYS) {
    const link = await delayLink(b, c, delay)
    try {
      const ms = await allReduce([b, c])
      emit({
        bench: 'fray',
        metric: `allreduce_16mib_2_hosts_delay_${delay}ms_ms`,
        value: ms,
        unit: 'ms',
        baseline: oneHost,
        lowerIsBetter: true,
      })
      if (delay === 10) at[`delay_${delay}ms`] = await grads([b, c])
      if (link.accepted() === 0) throw new Error(`fray hosts bench: the relays carried nothing at ${delay} ms`)
    } finally {
      await link.close()
    }
  }
  for (const [where, r] of Object.entries(at)) {
    const one = median(r.patterns.one)
    for (const pattern of Object.keys(r.patterns) as GradPattern[]) {
      const metric = `grads_quickstart_2_hosts_${where}_${pattern}${pattern === 'buckets' ? `_${r.buckets}` : ''}_ms`
      const ms = median(r.patterns[pattern])
      emit({ bench: 'fray', metric, value: ms, unit: 'ms', baseline: one, lowerIsBetter: true })
    }
  }
} finally {
  net.close()
}
