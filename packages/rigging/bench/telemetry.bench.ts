/**
 * Histogram throughput. Baseline: pushing every value onto an array, the least work an
 * exact-quantile histogram that keeps all values can do; ours also counts buckets, sum,
 * min and max, and keeps a bounded reservoir. A ratio near 1 means the bookkeeping is cheap.
 */
import { emit, median, timeIt } from '../src/bench.js'
import { MetricsRegistry } from '../src/telemetry/registry.js'

const N = 1_000_000
const values = Float64Array.from({ length: N }, (_, i) => ((i * 7919) % 10_000) / 1000)

const observeAll = () => {
  const h = new MetricsRegistry().histogram('bench_seconds', { help: 'bench' })
  for (let i = 0; i < N; i++) h.observe(values[i]!)
}
const methods = ['Get', 'Put', 'List', 'Delete']
const observeLabelled = () => {
  const h = new MetricsRegistry().histogram('bench_seconds', { help: 'bench', labelNames: ['method', 'code'] })
  for (let i = 0; i < N; i++) h.observe(values[i]!, { method: methods[i & 3]!, code: 200 })
}
const observeBound = () => {
  const h = new MetricsRegistry().histogram('bench_seconds', { help: 'bench', labelNames: ['method', 'code'] })
  const bound = methods.map((method) => h.with({ method, code: 200 }))
  for (let i = 0; i < N; i++) bound[i & 3]!.observe(values[i]!)
}
const pushAll = () => {
  const all: number[] = []
  for (let i = 0; i < N; i++) all.push(values[i]!)
  if (all.length !== N) throw new Error('unreachable')
}
// Interleaved rounds, so that GC and machine noise fall on all three alike.
const times: Record<'ours' | 'labelled' | 'bound' | 'base', number[]> = { ours: [], labelled: [], bound: [], base: [] }
for (let r = 0; r < 7; r++) {
  const warmup = r === 0 ? 1 : 0
  times.ours.push(await timeIt(observeAll, { runs: 1, warmup }))
  times.labelled.push(await timeIt(observeLabelled, { runs: 1, warmup }))
  times.bound.push(await timeIt(observeBound, { runs: 1, warmup }))
  times.base.push(await timeIt(pushAll, { runs: 1, warmup }))
}
const base = median(times.base)
emit({
  bench: 'rigging',
  metric: 'histogram_observe_per_s',
  value: N / median(times.ours),
  unit: 'obs/s',
  baseline: N / base,
})
emit({
  bench: 'rigging',
  metric: 'histogram_observe_labelled_per_s',
  value: N / median(times.labelled),
  unit: 'obs/s',
  baseline: N / base,
})
emit({
  bench: 'rigging',
  metric: 'histogram_observe_bound_per_s',
  value: N / median(times.bound),
  unit: 'obs/s',
  baseline: N / base,
})

// Snapshot cost with full reservoirs: 20 series × 2048 kept values, quantiles sorted each time.
const reg = new MetricsRegistry()
const h = reg.histogram('snap_seconds', { help: 'snap', labelNames: ['shard'] })
for (let s = 0; s < 20; s++) for (let i = 0; i < 5000; i++) h.observe(values[(s * 5000 + i) % N]!, { shard: s })
const snap = await timeIt(() => reg.toPrometheus(), { runs: 9 })
emit({ bench: 'rigging', metric: 'prometheus_exposition_ms', value: snap * 1000, unit: 'ms' })
