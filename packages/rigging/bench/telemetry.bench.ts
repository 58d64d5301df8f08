/**
 * Histogram throughput. Baseline: pushing every value onto an array, the least work an
 * exact-quantile histogram that keeps all values can do; ours also counts buckets, sum,
 * min and max, and keeps a bounded reservoir. A ratio near 1 means the bookkeeping is cheap.
 */
import { emit, timeIt } from '../src/bench.js'
import { MetricsRegistry } from '../src/telemetry/registry.js'

const N = 1_000_000
const values = Float64Array.from({ length: N }, (_, i) => ((i * 7919) % 10_000) / 1000)

const ours = await timeIt(() => {
  const h = new MetricsRegistry().histogram('bench_seconds', { help: 'bench' })
  for (let i = 0; i < N; i++) h.observe(values[i]!)
})
const base = await timeIt(() => {
  const all: number[] = []
  for (let i = 0; i < N; i++) all.push(values[i]!)
  if (all.length !== N) throw new Error('unreachable')
})
emit({ bench: 'rigging', metric: 'histogram_observe_per_s', value: N / ours, unit: 'obs/s', baseline: N / base })

const labelled = await timeIt(() => {
  const h = new MetricsRegistry().histogram('bench_seconds', { help: 'bench', labelNames: ['method', 'code'] })
  const methods = ['Get', 'Put', 'List', 'Delete']
  for (let i = 0; i < N; i++) h.observe(values[i]!, { method: methods[i & 3]!, code: 200 })
})
emit({ bench: 'rigging', metric: 'histogram_observe_labelled_per_s', value: N / labelled, unit: 'obs/s', baseline: N / base })

// Snapshot cost with full reservoirs: 20 series × 2048 kept values, quantiles sorted each time.
const reg = new MetricsRegistry()
const h = reg.histogram('snap_seconds', { help: 'snap', labelNames: ['shard'] })
for (let s = 0; s < 20; s++) for (let i = 0; i < 5000; i++) h.observe(values[(s * 5000 + i) % N]!, { shard: s })
const snap = await timeIt(() => reg.toPrometheus(), { runs: 9 })
emit({ bench: 'rigging', metric: 'prometheus_exposition_ms', value: snap * 1000, unit: 'ms' })
