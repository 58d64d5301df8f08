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
 * Then GPT-2 small's cached greedy decoding at batch 1 on one thread (bench/decode-roofline.ts) against the PyTorch
 * reference's KV-cache loop, rounds interleaved (LEVANTER_BENCH_DECODE_ROUNDS @default 3, 0 skips it), with this
 * machine's one-thread memory bandwidth (the native addon's STREAM-style copy, triad and read) and the roofline
 * fraction: tokens/s ÷ (bandwidth ÷ the weight bytes a token reads); on two cores also the same decoding on 2 threads
 * against the 2-thread bandwidth (`…_2_threads` lines). With the rounds, bf16 against fp32 GEMM GFLOP/s
 * at GPT-2 small's MLP and vocab-head shapes (bench/bf16-gemm.ts; skipped, saying why, without AVX512_BF16).
 * Then GPT-2 small training against PyTorch on 1 and 2 cores with peak RSS (bench/gpt2-sizes.ts).
 */
import os from 'node:os'
import { fileURLToPath } from 'node:url'
import { emit, median } from '@marin/rigging/bench'
import { nativeGemm } from '../src/kernels/native-gemm.js'
import { bf16GemmLines } from './bf16-gemm.js'
import { benchGpt2Sizes } from './gpt2-sizes.js'
import { findTorch, levanterRun, pytorchRun, run, tryRun } from './processes.js'
import type { Result, RunSpec, Size } from './processes.js'

/** A whole-number env setting of at least `min`; anything else stops the bench with exit 2. */
function setting(name: string, dflt: number, min: number): number {
  const raw = process.env[name]
  if (raw === undefined || raw === '') return dflt
  const n = Number(raw)
  if (Number.isInteger(n) && n >= min) return n
  process.stderr.write(`levanter bench: ${name} must be a whole number ≥ ${min}, got "${raw}"\n`)
  process.exit(2)
}

/** LEVANTER_BENCH_SIZES: unset/0 none, 1 the default sweep, or a list of dModel/layers (heads of 64). */
function sizesSetting(): Size[] {
  const raw = process.env.LEVANTER_BENCH_SIZES ?? ''
  if (raw === '' || raw === '0') return []
  const list = raw === '1' ? '128/2,512/6,768/8,1024/8' : raw
  return list.split(',').map((item) => {
    const m = /^\s*(\d+)\/(\d+)\s*$/.exec(item)
    const dModel = Number(m?.[1]),
      nLayers = Number(m?.[2])
    if (!m || dModel < 64 || dModel % 64 !== 0 || nLayers < 1) {
      process.stderr.write(
        `levanter bench: LEVANTER_BENCH_SIZES: "${item}" is not dModel/layers with dModel a multiple of 64 ` +
          `(e.g. 1, or 128/2,768/8)\n`,
      )
      process.exit(2)
    }
    return { dModel, nLayers, nHeads: dModel / 64 }
  })
}

const steps = String(setting('LEVANTER_BENCH_STEPS', 3, 1))
const stockSteps = setting('LEVANTER_BENCH_STOCK_STEPS', 1, 0)
const rounds = setting('LEVANTER_BENCH_ROUNDS', 3, 0)
const sizes = sizesSetting()
const sizeSteps = String(setting('LEVANTER_BENCH_SIZE_STEPS', 1, 1))
const decodeRounds = setting('LEVANTER_BENCH_DECODE_ROUNDS', 3, 0)

const torch = findTorch()
const python = 'python' in torch ? torch.python : undefined
if ('why' in torch) {
  process.stderr.write(
    `levanter bench: no PyTorch reference (${torch.why}); to compare with PyTorch, install it ` +
      '(Debian: apt-get install python3-torch libopenblas0-pthread) ' +
      'or set LEVANTER_BENCH_PYTHON to a python with torch\n',
  )
} else {
  process.stderr.write(`levanter bench: PyTorch ${torch.torch} from ${torch.python}\n`)
}
/** Warn once when PyTorch did not load OpenBLAS (Debian's reference BLAS is some 20× slower: a meaningless
 * baseline). */
let blasChecked = false
function checkBlas(r: Result): Result {
  if (!blasChecked && !/openblas|mkl/i.test(String(r.blas))) {
    process.stderr.write(
      `levanter bench: PyTorch runs on ${r.blas}, not OpenBLAS; its numbers are not a fair baseline ` +
        `(Debian: apt-get install libopenblas0-pthread)\n`,
    )
  }
  blasChecked = true
  return r
}

// The machine is shared: run the variants in rounds (stock, PyTorch, 1 process, 2 processes) so each
// ratio compares runs made minutes apart, and report medians over the rounds.
const load: number[] = [os.loadavg()[0]!]
const native = nativeGemm().addon !== undefined
const stock: Result[] = [],
  one: Result[] = [],
  two: Result[] = [],
  oneFma: Result[] = [],
  twoFma: Result[] = [],
  torch1: Result[] = [],
  torch2: Result[] = [],
  twoThreads: Result[] = []
for (let r = 0; r < rounds; r++) {
  if (stockSteps > 0) stock.push(run(levanterRun('stock', String(stockSteps))))
  if (python) torch1.push(checkBlas(run(pytorchRun(python, 1, steps))))
  one.push(run(levanterRun('levanter', steps)))
  if (native) oneFma.push(run(levanterRun('levanter', steps, { gemm: 'fma' })))
  if (python) torch2.push(checkBlas(run(pytorchRun(python, 2, steps))))
  two.push(run(levanterRun('levanter-dp2', steps)))
  if (native) twoThreads.push(run(levanterRun('levanter', steps, { threads: 2 })))
  if (native) twoFma.push(run(levanterRun('levanter-dp2', steps, { gemm: 'fma' })))
  load.push(os.loadavg()[0]!)
  const t = (x: Result | undefined) => (x ? x.tokensPerSec!.toFixed(1) : '-')
  const vsStock = (x: Result) => (stock[r] ? ` (${(x.tokensPerSec! / stock[r]!.tokensPerSec!).toFixed(2)}× stock)` : '')
  process.stderr.write(
    `round ${r + 1} tokens/s: stock ${t(stock[r])}, PyTorch 1 thread ${t(torch1[r])}, 2 threads ${t(torch2[r])}, ` +
      `1 process ${t(one[r])}${vsStock(one[r]!)}, 2 processes ${t(two[r])}${vsStock(two[r]!)}, ` +
      `1 process × 2 threads ${t(twoThreads[r])} ` +
      `${JSON.stringify(two[r]!.phasesMs)}; tokens/CPU-s: 1 process ${one[r]!.tokensPerCpuSec!.toFixed(1)}, ` +
      `per replica ${two[r]!.tokensPerCpuSec!.toFixed(1)}; load ${load[r + 1]!.toFixed(1)}\n`,
  )
}
const m = (xs: Result[], k: string) => median(xs.map((x) => x[k] as number))
const ratio = (xs: Result[]) => median(xs.map((x, i) => x.tokensPerSec! / stock[i]!.tokensPerSec!))
/** The stock baseline of a line, where the stock variant ran. */
const vsStock = (k: string) => (stock.length ? { baseline: m(stock, k) } : {})
/** A run's peak RSS per process: the driver's, or the largest replica's where that is larger. */
const perProcessRss = (x: Result) => Math.max(x.peakRssMiB!, x.replicaPeakRssMiB ?? 0)
// levanter's 2-core layouts, each round's fastest taken: 2 data-parallel processes of 1 thread each,
// and (where the native kernels run) 1 process on 2 threads.
const twoCoreLayouts = native ? [two, twoThreads] : [two]
const bestTwo = two.map((_, i) =>
  twoCoreLayouts.map((xs) => xs[i]!).reduce((a, x) => (x.tokensPerSec! > a.tokensPerSec! ? x : a)),
)

const b = 'levanter'
emit({ bench: b, metric: 'load_average_1m', value: median(load), unit: 'runnable' })
if (rounds > 0) {
  if (stock.length) {
    emit({ bench: b, metric: 'stock_tfjs_train_tokens_per_s', value: m(stock, 'tokensPerSec'), unit: 'tokens/s' })
    emit({ bench: b, metric: 'stock_tfjs_model_flops_per_s', value: m(stock, 'flopsPerSec'), unit: 'FLOP/s' })
    emit({ bench: b, metric: 'stock_tfjs_peak_rss', value: m(stock, 'peakRssMiB'), unit: 'MiB' })
  }
  emit({
    bench: b,
    metric: 'train_tokens_per_s_1_process',
    value: m(one, 'tokensPerSec'),
    unit: 'tokens/s',
    ...vsStock('tokensPerSec'),
  })
  if (stock.length) emit({ bench: b, metric: 'train_ratio_1_process_median_of_rounds', value: ratio(one), unit: 'x' })
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
        ...vsStock('tokensPerSec'),
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
    ...vsStock('tokensPerCpuSec'),
  })
  emit({
    bench: b,
    metric: 'model_flops_per_s_1_process',
    value: m(one, 'flopsPerSec'),
    unit: 'FLOP/s',
    ...vsStock('flopsPerSec'),
  })
  emit({
    bench: b,
    metric: 'peak_rss_1_process',
    value: m(one, 'peakRssMiB'),
    unit: 'MiB',
    ...vsStock('peakRssMiB'),
    lowerIsBetter: true,
  })
  emit({
    bench: b,
    metric: 'train_tokens_per_s_2_processes',
    value: m(two, 'tokensPerSec'),
    unit: 'tokens/s',
    ...vsStock('tokensPerSec'),
  })
  if (stock.length) emit({ bench: b, metric: 'train_ratio_2_processes_median_of_rounds', value: ratio(two), unit: 'x' })
  if (twoThreads.length)
    emit({
      bench: b,
      metric: 'train_tokens_per_s_1_process_2_threads',
      value: m(twoThreads, 'tokensPerSec'),
      unit: 'tokens/s',
      baseline: m(two, 'tokensPerSec'),
    })
  emit({
    bench: b,
    metric: 'train_tokens_per_cpu_s_per_replica_2_processes',
    value: m(two, 'tokensPerCpuSec'),
    unit: 'tokens/CPU-s',
    ...vsStock('tokensPerCpuSec'),
  })
  emit({
    bench: b,
    metric: 'model_flops_per_s_2_processes',
    value: m(two, 'flopsPerSec'),
    unit: 'FLOP/s',
    ...vsStock('flopsPerSec'),
  })
  emit({
    bench: b,
    metric: 'peak_rss_per_replica_2_processes',
    value: m(two, 'replicaPeakRssMiB'),
    unit: 'MiB',
    ...vsStock('peakRssMiB'),
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
  if (python) {
    // Against the PyTorch reference on the same cores: tokens/s (ratio = ours ÷ PyTorch) and peak RSS
    // per process (ratio = PyTorch ÷ ours, so higher is better here too).
    emit({
      bench: b,
      metric: 'train_ratio_vs_pytorch_1_core',
      value: m(one, 'tokensPerSec'),
      unit: 'tokens/s',
      baseline: m(torch1, 'tokensPerSec'),
    })
    emit({
      bench: b,
      metric: 'train_ratio_vs_pytorch_2_cores',
      value: m(bestTwo, 'tokensPerSec'),
      unit: 'tokens/s',
      baseline: m(torch2, 'tokensPerSec'),
    })
    emit({
      bench: b,
      metric: 'peak_rss_ratio_vs_pytorch_1_core',
      value: m(one, 'peakRssMiB'),
      unit: 'MiB',
      baseline: m(torch1, 'peakRssMiB'),
      lowerIsBetter: true,
    })
    emit({
      bench: b,
      metric: 'peak_rss_per_process_ratio_vs_pytorch_2_cores',
      value: median(bestTwo.map(perProcessRss)),
      unit: 'MiB',
      baseline: m(torch2, 'peakRssMiB'),
      lowerIsBetter: true,
    })
  }
  const gen = run(levanterRun('generate', steps))
  emit({
    bench: b,
    metric: 'generate_tokens_per_s_kv_cache',
    value: gen.cachedTokensPerSec!,
    unit: 'tokens/s',
    baseline: gen.uncachedTokensPerSec!,
  })
  emit({ bench: b, metric: 'generate_tokens_per_s_no_cache', value: gen.uncachedTokensPerSec!, unit: 'tokens/s' })
  const gemm = run(levanterRun('gemm', '7'))
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
  // bf16 against fp32 products at GPT-2 small's shapes on the native addon (bench/bf16-gemm.ts)
  bf16GemmLines(b, 3)
}

// GPT-2 small decoding, batch 1, one thread: levanter's `generate` and PyTorch's KV-cache loop in alternate runs.
const GPT2_SMALL: Size = { dModel: 768, nLayers: 12, nHeads: 12 }
const decodeRun: RunSpec = {
  label: 'decode GPT-2 small',
  command: process.execPath,
  args: ['--import', 'tsx', fileURLToPath(new URL('./decode-roofline.ts', import.meta.url)), steps],
  env: { LOG_LEVEL: 'warn', LEVANTER_THREADS: '1' },
  prefix: '{"variant"',
  liveStderr: true,
}
const torchDecodeRun = (py: string): RunSpec => {
  const spec = pytorchRun(py, 1, steps, GPT2_SMALL)
  const flags = ['--vocab', '50257', '--context', '1024', '--prompt', '16', '--decode', '32']
  return { ...spec, label: 'pytorch decode GPT-2 small', args: [...spec.args, ...flags] }
}
// the same on two threads (the step's products split over both cores) where the machine has them
const decodeRun2: RunSpec = {
  ...decodeRun,
  label: 'decode GPT-2 small, 2 threads',
  env: { ...decodeRun.env, LEVANTER_THREADS: '2' },
}
const decodeOn2 = os.availableParallelism() >= 2
const decodes: Result[] = [],
  decodes2: Result[] = [],
  torchDecodes: Result[] = []
for (let r = 0; r < decodeRounds; r++) {
  decodes.push(run(decodeRun))
  if (decodeOn2) decodes2.push(run(decodeRun2))
  if (python) torchDecodes.push(checkBlas(run(torchDecodeRun(python))))
  process.stderr.write(
    `decode round ${r + 1} tokens/s: levanter ${decodes[r]!.tokensPerSec!.toFixed(2)}` +
      `${decodeOn2 ? ` (2 threads ${decodes2[r]!.tokensPerSec!.toFixed(2)})` : ''}, ` +
      `PyTorch ${torchDecodes[r]?.tokensPerSec?.toFixed(2) ?? '-'}; load ${os.loadavg()[0]!.toFixed(1)}\n`,
  )
}
if (decodeRounds > 0 && decodeOn2) {
  emit({
    bench: b,
    metric: 'decode_tokens_per_s_gpt2_small_2_threads',
    value: m(decodes2, 'tokensPerSec'),
    unit: 'tokens/s',
    baseline: m(decodes, 'tokensPerSec'),
  })
  if (decodes2[0]!.readGBsThreads !== undefined) {
    for (const k of ['copy', 'read'])
      emit({ bench: b, metric: `memory_bandwidth_${k}_2_threads`, value: m(decodes2, `${k}GBsThreads`), unit: 'GB/s' })
    // two threads' tokens/s against two threads' bandwidth (the read-only sum: a product's pattern) ÷ bytes per token
    emit({
      bench: b,
      metric: 'decode_roofline_fraction_gpt2_small_2_threads_vs_read',
      value: median(decodes2.map((x) => x.tokensPerSec! / ((x.readGBsThreads! * 1e9) / x.weightBytesPerToken!))),
      unit: 'fraction',
    })
  }
}
if (decodeRounds > 0) {
  const tps = m(decodes, 'tokensPerSec'),
    bytes = decodes[0]!.weightBytesPerToken!
  emit({
    bench: b,
    metric: 'decode_tokens_per_s_gpt2_small',
    value: tps,
    unit: 'tokens/s',
    ...(python ? { baseline: m(torchDecodes, 'tokensPerSec') } : {}),
  })
  if (python)
    emit({
      bench: b,
      metric: 'decode_ratio_vs_pytorch_gpt2_small',
      value: median(decodes.map((x, i) => x.tokensPerSec! / torchDecodes[i]!.tokensPerSec!)),
      unit: 'x',
    })
  else process.stderr.write('levanter bench: decode_ratio_vs_pytorch_gpt2_small skipped: no PyTorch (see above)\n')
  // the one-call native step (what generate runs) against the same steps on tensor ops, in the same rounds
  emit({
    bench: b,
    metric: 'decode_tokens_per_s_gpt2_small_one_call_vs_tensor_ops',
    value: tps,
    unit: 'tokens/s',
    baseline: m(decodes, 'tokensPerSecTensorOps'),
  })
  const bf16 = decodes[0]!.tokensPerSecBf16 !== undefined
  if (bf16)
    emit({
      bench: b,
      metric: 'decode_tokens_per_s_gpt2_small_bf16_weights',
      value: m(decodes, 'tokensPerSecBf16'),
      unit: 'tokens/s',
      baseline: tps,
    })
  else process.stderr.write('levanter bench: no bf16 decode rows: the CPU or the addon lacks AVX512_BF16\n')
  emit({ bench: b, metric: 'decode_weight_bytes_per_token_gpt2_small', value: bytes, unit: 'bytes' })
  if (bf16)
    emit({
      bench: b,
      metric: 'decode_weight_bytes_per_token_gpt2_small_bf16',
      value: decodes[0]!.bf16WeightBytesPerToken!,
      unit: 'bytes',
    })
  if (decodes[0]!.copyGBs === undefined)
    process.stderr.write('levanter bench: no memory bandwidth or roofline: the native addon does not run here\n')
  else {
    for (const k of ['copy', 'triad', 'read'])
      emit({ bench: b, metric: `memory_bandwidth_${k}_1_thread`, value: m(decodes, `${k}GBs`), unit: 'GB/s' })
    const cpu = decodes[0]!.copyCpuGBs !== undefined
    if (cpu)
      for (const k of ['copy', 'read'])
        emit({
          bench: b,
          metric: `memory_bandwidth_${k}_1_thread_cpu_time`,
          value: m(decodes, `${k}CpuGBs`),
          unit: 'GB/s',
        })
    // the roofline: bandwidth ÷ bytes per token, against the STREAM copy (the issue's measure) and the read-only sum;
    // over the wall clock, and over CPU time (tokens per CPU second against bandwidth per CPU second: what a core of
    // our own gives on a shared machine); for the float32 weights and the bf16 copies (half the bytes)
    const ways = [
      ['', 'tokensPerSec', 'weightBytesPerToken', ''],
      ...(bf16 ? [['_bf16_weights', 'tokensPerSecBf16', 'bf16WeightBytesPerToken', '']] : []),
      ...(cpu ? [['_cpu_time', 'tokensPerCpuSec', 'weightBytesPerToken', 'Cpu']] : []),
      ...(cpu && bf16 ? [['_bf16_weights_cpu_time', 'tokensPerCpuSecBf16', 'bf16WeightBytesPerToken', 'Cpu']] : []),
    ] as const
    for (const [way, rate, per, clock] of ways)
      for (const [suffix, k] of [
        ['', 'copy'],
        ['_vs_read', 'read'],
      ] as const)
        emit({
          bench: b,
          metric: `decode_roofline_fraction_gpt2_small${way}${suffix}`,
          value: median(decodes.map((x) => x[rate]! / ((x[`${k}${clock}GBs`]! * 1e9) / x[per]!))),
          unit: 'fraction',
        })
  }
}

// GPT-2 small (and medium with LEVANTER_BENCH_GPT2_MEDIUM=1) training against PyTorch, 1 core and 2 cores
// (bench/gpt2-sizes.ts; LEVANTER_BENCH_GPT2_ROUNDS @default 3, 0 skips it).
benchGpt2Sizes(emit)

// The size sweep: one levanter process against PyTorch on one thread, per model size. A size
// levanter (or PyTorch) cannot train is a line with value 0 and the run's error, not a failed bench.
const SIZE_TIMEOUT_MS = 30 * 60_000
for (const size of sizes) {
  const name = `size_d${size.dModel}_l${size.nLayers}`
  const ours = tryRun({
    ...levanterRun('levanter', sizeSteps, { size }),
    liveStderr: false,
    timeoutMs: SIZE_TIMEOUT_MS,
  })
  const theirs = python ? tryRun({ ...pytorchRun(python, 1, sizeSteps, size), timeoutMs: SIZE_TIMEOUT_MS }) : undefined
  if (theirs?.ok) checkBlas(theirs.result)
  if (!python) {
    if (!ours.ok) failedLine(`${name}_train_tokens_per_s_1_process`, 'tokens/s', ours.error)
    else {
      emit({
        bench: b,
        metric: `${name}_train_tokens_per_s_1_process`,
        value: ours.result.tokensPerSec!,
        unit: 'tokens/s',
      })
      emit({ bench: b, metric: `${name}_peak_rss_1_process`, value: ours.result.peakRssMiB!, unit: 'MiB' })
    }
    continue
  }
  const baseline = (k: string) => (theirs?.ok ? { baseline: theirs.result[k]! } : {})
  const error = [ours, theirs].flatMap((o) => (o && !o.ok ? [o.error] : [])).join('; ')
  if (!ours.ok) {
    failedLine(`${name}_train_ratio_vs_pytorch_1_core`, 'tokens/s', error, baseline('tokensPerSec'))
    continue
  }
  const line = emit({
    bench: b,
    metric: `${name}_train_ratio_vs_pytorch_1_core`,
    value: ours.result.tokensPerSec!,
    unit: 'tokens/s',
    ...baseline('tokensPerSec'),
  })
  if (error) process.stderr.write(`levanter bench: ${line.metric} has no baseline: ${error}\n`)
  emit({
    bench: b,
    metric: `${name}_peak_rss_ratio_vs_pytorch_1_core`,
    value: ours.result.peakRssMiB!,
    unit: 'MiB',
    ...baseline('peakRssMiB'),
    lowerIsBetter: true,
  })
}

/** A line for a run that failed: value 0 (it trained nothing) and the run's error. */
function failedLine(metric: string, unit: string, error: string, base: { baseline?: number } = {}): void {
  const baseline = base.baseline === undefined ? {} : { baseline: Number(base.baseline.toPrecision(4)), ratio: 0 }
  const line = { bench: b, metric, value: 0, unit, ...baseline, error }
  process.stdout.write(`${JSON.stringify(line)}\n`)
}
