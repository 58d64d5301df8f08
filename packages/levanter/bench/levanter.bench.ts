/**
 * `pnpm bench levanter`: training throughput at the reference config (vocab 512, context 128,
 * 4 layers, 4 heads, d_model 256, MLP 4×, batch 16, AdamW) for the stock tfjs baseline, levanter on
 * one process and levanter data-parallel on two; generation with and without the KV cache; the
 * GFLOP/s of levanter's GEMM builds against XNNPACK on the reference MLP products. Where the native
 * GEMM runs (the default then), each round also trains 1 and 2 processes on the wasm `fma` build
 * (`*_fma` lines) to compare the two.
 * Each variant runs in its own process (bench/variant.ts) so its peak RSS is its own.
 * LEVANTER_BENCH_STEPS sets the timed steps per levanter variant (median reported) @default 3;
 * LEVANTER_BENCH_STOCK_STEPS the stock baseline's @default 1; LEVANTER_BENCH_ROUNDS the rounds @default 3.
 */
import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import os from 'node:os'
import { emit, median } from '@marin/rigging/bench'
import { nativeGemm } from '../src/kernels/native-gemm.js'

const steps = process.env.LEVANTER_BENCH_STEPS ?? '3'
const rounds = Number(process.env.LEVANTER_BENCH_ROUNDS ?? 3)
const variantFile = fileURLToPath(new URL('./variant.ts', import.meta.url))
type Result = Record<string, number> & { phasesMs?: Record<string, number> }

function run(variant: string, n = steps, gemm?: string): Result {
  process.stderr.write(`levanter bench: ${variant}${gemm ? ` (LEVANTER_GEMM=${gemm})` : ''}…\n`)
  const r = spawnSync(process.execPath, ['--import', 'tsx', variantFile, variant, n], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, LOG_LEVEL: 'warn', ...(gemm ? { LEVANTER_GEMM: gemm } : {}) },
  })
  const line = r.stdout
    .trim()
    .split('\n')
    .filter((l) => l.startsWith('{"variant"'))
    .pop()
  if (!line) throw new Error(`bench variant ${variant} printed no result (exit ${r.status})`)
  return JSON.parse(line)
}

// The machine is shared: run the variants in rounds (stock, 1 process, 2 processes) so each ratio
// compares runs made minutes apart, and report medians over the rounds.
const load: number[] = [os.loadavg()[0]!]
const native = nativeGemm().addon !== undefined
const stock: Result[] = [],
  one: Result[] = [],
  two: Result[] = [],
  oneFma: Result[] = [],
  twoFma: Result[] = []
for (let r = 0; r < rounds; r++) {
  stock.push(run('stock', process.env.LEVANTER_BENCH_STOCK_STEPS ?? '1'))
  one.push(run('levanter'))
  if (native) oneFma.push(run('levanter', steps, 'fma'))
  two.push(run('levanter-dp2'))
  if (native) twoFma.push(run('levanter-dp2', steps, 'fma'))
  load.push(os.loadavg()[0]!)
  const t = (x: Result) => x.tokensPerSec!.toFixed(1)
  process.stderr.write(
    `round ${r + 1} (tokens/CPU-s: stock ` +
      `${stock[r]!.tokensPerCpuSec!.toFixed(1)}, 1 process ` +
      `${one[r]!.tokensPerCpuSec!.toFixed(1)}, per replica ` +
      `${two[r]!.tokensPerCpuSec!.toFixed(1)}): stock ${t(stock[r]!)}, ` +
      `1 process ${t(one[r]!)} (` +
      `${(one[r]!.tokensPerSec! / stock[r]!.tokensPerSec!).toFixed(2)}` +
      `×), 2 processes ${t(two[r]!)} (` +
      `${(two[r]!.tokensPerSec! / stock[r]!.tokensPerSec!).toFixed(2)}` +
      `×) ${JSON.stringify(two[r]!.phasesMs)}, load ` +
      `${load[r + 1]!.toFixed(1)}\n`,
  )
}
const gen = run('generate')
const gemm = run('gemm', '7')
const m = (xs: Result[], k: string) => median(xs.map((x) => x[k] as number))
const ratio = (xs: Result[]) => median(xs.map((x, i) => x.tokensPerSec! / stock[i]!.tokensPerSec!))

const b = 'levanter'
emit({ bench: b, metric: 'load_average_1m', value: median(load), unit: 'runnable' })
emit({ bench: b, metric: 'stock_tfjs_train_tokens_per_s', value: m(stock, 'tokensPerSec'), unit: 'tokens/s' })
emit({ bench: b, metric: 'stock_tfjs_model_flops_per_s', value: m(stock, 'flopsPerSec'), unit: 'FLOP/s' })
emit({ bench: b, metric: 'stock_tfjs_peak_rss', value: m(stock, 'peakRssMiB'), unit: 'MiB' })
emit({
  bench: b,
  metric: 'train_tokens_per_s_1_process',
  value: m(one, 'tokensPerSec'),
  unit: 'tokens/s',
  baseline: m(stock, 'tokensPerSec'),
})
emit({ bench: b, metric: 'train_ratio_1_process_median_of_rounds', value: ratio(one), unit: 'x' })
if (native) {
  for (const [procs, xs, fma] of [
    ['1_process', one, oneFma],
    ['2_processes', two, twoFma],
  ] as const) {
    emit({
      bench: b,
      metric: `train_tokens_per_s_${procs}_fma`,
      value: m(fma, 'tokensPerSec'),
      unit: 'tokens/s',
      baseline: m(stock, 'tokensPerSec'),
    })
    emit({
      bench: b,
      metric: `train_ratio_${procs}_native_over_fma_median_of_rounds`,
      value: median(xs.map((x, i) => x.tokensPerSec! / fma[i]!.tokensPerSec!)),
      unit: 'x',
    })
  }
}
emit({
  bench: b,
  metric: 'train_tokens_per_cpu_s_1_process',
  value: m(one, 'tokensPerCpuSec'),
  unit: 'tokens/CPU-s',
  baseline: m(stock, 'tokensPerCpuSec'),
})
emit({
  bench: b,
  metric: 'model_flops_per_s_1_process',
  value: m(one, 'flopsPerSec'),
  unit: 'FLOP/s',
  baseline: m(stock, 'flopsPerSec'),
})
emit({
  bench: b,
  metric: 'peak_rss_1_process',
  value: m(one, 'peakRssMiB'),
  unit: 'MiB',
  baseline: m(stock, 'peakRssMiB'),
  lowerIsBetter: true,
})
emit({
  bench: b,
  metric: 'train_tokens_per_s_2_processes',
  value: m(two, 'tokensPerSec'),
  unit: 'tokens/s',
  baseline: m(stock, 'tokensPerSec'),
})
emit({ bench: b, metric: 'train_ratio_2_processes_median_of_rounds', value: ratio(two), unit: 'x' })
emit({
  bench: b,
  metric: 'train_tokens_per_cpu_s_per_replica_2_processes',
  value: m(two, 'tokensPerCpuSec'),
  unit: 'tokens/CPU-s',
  baseline: m(stock, 'tokensPerCpuSec'),
})
emit({
  bench: b,
  metric: 'model_flops_per_s_2_processes',
  value: m(two, 'flopsPerSec'),
  unit: 'FLOP/s',
  baseline: m(stock, 'flopsPerSec'),
})
emit({
  bench: b,
  metric: 'peak_rss_per_replica_2_processes',
  value: m(two, 'replicaPeakRssMiB'),
  unit: 'MiB',
  baseline: m(stock, 'peakRssMiB'),
  lowerIsBetter: true,
})
for (const phase of ['grads', 'flatten', 'allReduce', 'apply', 'driver', 'replicaCpu']) {
  emit({
    bench: b,
    metric: `step_ms_2_processes_${phase.replace('allReduce', 'all_reduce').replace('replicaCpu', 'replica_cpu')}`,
    value: median(two.map((x) => x.phasesMs![phase]!)),
    unit: 'ms',
  })
}
emit({ bench: b, metric: 'step_ms_1_process', value: m(one, 'stepMs'), unit: 'ms' })
emit({
  bench: b,
  metric: 'generate_tokens_per_s_kv_cache',
  value: gen.cachedTokensPerSec!,
  unit: 'tokens/s',
  baseline: gen.uncachedTokensPerSec!,
})
emit({ bench: b, metric: 'generate_tokens_per_s_no_cache', value: gen.uncachedTokensPerSec!, unit: 'tokens/s' })
for (const build of [...(native ? ['native'] : []), 'fma', 'simd']) {
  emit({
    bench: b,
    metric: `gemm_${build}_gflops_forward`,
    value: gemm[`${build}Forward`]!,
    unit: 'GFLOP/s',
    baseline: gemm.xnnpackForward!,
  })
  emit({
    bench: b,
    metric: `gemm_${build}_gflops_weight_grad`,
    value: gemm[`${build}WeightGrad`]!,
    unit: 'GFLOP/s',
    baseline: gemm.xnnpackWeightGrad!,
  })
}
