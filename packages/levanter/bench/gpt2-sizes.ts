/**
 * Training at the sizes people train, against the PyTorch reference (bench/pytorch-reference.py: same architecture,
 * optimizer and FLOP formula), rounds interleaved, each run a process of its own (its peak RSS its own), medians of
 * 3 timed steps after 1 warm-up. Sizes: `small` (GPT-2 small, 124 M: vocab 50257, context 256, 12 × 768, batch 4),
 * `small_ctx1024` (the same model at context 1024, batch 1: the same tokens per step, attention 4× longer) and
 * `medium` (GPT-2 medium, 350 M: 24 × 1024, 16 heads, context 256, batch 4; slow, so only when asked).
 * Lines per size `s`: `train_ratio_vs_pytorch_gpt2_<s>_1_core` (levanter on 1 thread ÷ PyTorch on 1 thread,
 * tokens/s), `train_ratio_vs_pytorch_gpt2_<s>_2_cores` (levanter's best 2-core layout ÷ PyTorch on 2 threads) and
 * `peak_rss_ratio_gpt2_<s>` (PyTorch's peak RSS ÷ levanter's on 1 thread: higher is better, ≥ 1 is the goal), with
 * the tokens/s of each side; the ratios are medians of the per-round ratios.
 * `train_cpu_time_ratio_vs_pytorch_gpt2_<s>_1_core` is PyTorch's CPU time per step ÷ levanter's (1 thread each):
 * on a shared machine, where wall time is mostly the scheduler's, the comparison that still says which is faster.
 * For `small` also, in the same rounds, the 1-core pair again with a busy background process spinning on one core
 * (a machine shared with another job):
 * `train_ratio_vs_pytorch_gpt2_small_1_core_loaded` and `train_loaded_retention_gpt2_small_1_core` (the loaded
 * ratio ÷ the quiet one, per round; the goal is ≥ 0.9).
 * Settings: LEVANTER_BENCH_GPT2_ROUNDS @default 3 (0 skips); LEVANTER_BENCH_GPT2_STEPS timed steps @default 3;
 * LEVANTER_BENCH_GPT2_SIZES a list of sizes @default small,small_ctx1024; LEVANTER_BENCH_GPT2_MEDIUM=1 adds medium
 * (it says so on stderr when it is left out); LEVANTER_BENCH_GPT2_LOADED @default 1 (0 leaves out the loaded pair);
 * LEVANTER_BENCH_GPT2_LAYOUTS the 2-core layouts, a list of `threads2` (1 process × 2 native threads) and `dp2`
 * (2 data-parallel processes × 1 thread) @default threads2,dp2.
 * Alone: `node_modules/.bin/tsx packages/levanter/bench/gpt2-sizes.ts`. Its child runs, by hand:
 * `… gpt2-sizes.ts --child train small|small_ctx1024|medium [steps] [--dp2]` (one JSON line) and
 * `… gpt2-sizes.ts --child profile` (where one GPT-2-small step goes, per kernel under tf.profile; LEVANTER_THREADS=1
 * for one thread). bench/profile-native.ts gives the native kernels' own CPU time per call, which tf.profile's
 * scope timings overstate for the fused forward products.
 */
import { spawn } from 'node:child_process'
import type { ChildProcess } from 'node:child_process'
import os from 'node:os'
import { resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { emit as emitLine, median } from '@marin/rigging/bench'
import { findTorch, pytorchRun, tryRun } from './processes.js'
import type { Outcome, Result, RunSpec } from './processes.js'

export const GPT2_SMALL = { vocabSize: 50257, seqLen: 256, dModel: 768, nLayers: 12, nHeads: 12 }
export const GPT2_MEDIUM = { ...GPT2_SMALL, dModel: 1024, nLayers: 24, nHeads: 16 }
export const GPT2_BATCH = 4
/** Each size's model and batch (sequences per step). */
export const GPT2_SIZES = {
  small: { config: GPT2_SMALL, batch: GPT2_BATCH },
  small_ctx1024: { config: { ...GPT2_SMALL, seqLen: 1024 }, batch: 1 },
  medium: { config: GPT2_MEDIUM, batch: GPT2_BATCH },
} as const
type SizeName = keyof typeof GPT2_SIZES
const isSize = (s: string): s is SizeName => Object.hasOwn(GPT2_SIZES, s)
const LAYOUTS = ['threads2', 'dp2'] as const
type Layout = (typeof LAYOUTS)[number]

const thisFile = fileURLToPath(import.meta.url)
/** A GPT-2 run can take minutes a step on a loaded machine; a run past this is reported as failed. */
const RUN_TIMEOUT_MS = 40 * 60 * 1000

/** A whole-number env setting of at least `min`; anything else throws naming it. */
function setting(name: string, dflt: number, min: number): number {
  const raw = process.env[name]
  if (raw === undefined || raw === '') return dflt
  const n = Number(raw)
  if (Number.isInteger(n) && n >= min) return n
  throw new Error(`gpt2-sizes bench: ${name} must be a whole number ≥ ${min}, got "${raw}"`)
}

function layoutsSetting(): Layout[] {
  const raw = process.env.LEVANTER_BENCH_GPT2_LAYOUTS ?? ''
  if (raw === '') return [...LAYOUTS]
  return raw.split(',').map((s) => {
    const l = s.trim()
    if ((LAYOUTS as readonly string[]).includes(l)) return l as Layout
    throw new Error(`gpt2-sizes bench: LEVANTER_BENCH_GPT2_LAYOUTS: "${l}" is not one of ${LAYOUTS.join(', ')}`)
  })
}

function sizesSetting(): SizeName[] {
  const raw = process.env.LEVANTER_BENCH_GPT2_SIZES ?? ''
  const sizes = (raw === '' ? ['small', 'small_ctx1024'] : raw.split(',')).map((s) => {
    const n = s.trim()
    if (isSize(n)) return n
    throw new Error(
      `gpt2-sizes bench: LEVANTER_BENCH_GPT2_SIZES: "${n}" is not one of ${Object.keys(GPT2_SIZES).join(', ')}`,
    )
  })
  if (setting('LEVANTER_BENCH_GPT2_MEDIUM', 0, 0) && !sizes.includes('medium')) sizes.push('medium')
  if (!sizes.includes('medium'))
    process.stderr.write('gpt2-sizes bench: GPT-2 medium left out (slow); LEVANTER_BENCH_GPT2_MEDIUM=1 runs it\n')
  return sizes
}

/** A process spinning on one core until stopped: the same-run background load of the `…_loaded` rows. */
function busyLoad(): ChildProcess {
  const p = spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' })
  const stop = () => p.kill('SIGKILL')
  process.once('exit', stop)
  return p
}

/** levanter training GPT-2 `size` in a child process of this file. */
function levanterSpec(size: SizeName, steps: number, layout: 'threads1' | Layout): RunSpec {
  const threads = layout === 'threads2' ? 2 : 1
  return {
    label: `levanter gpt2-${size} ${layout}`,
    command: process.execPath,
    args: [
      '--import',
      'tsx',
      thisFile,
      '--child',
      'train',
      size,
      String(steps),
      ...(layout === 'dp2' ? ['--dp2'] : []),
    ],
    env: { LOG_LEVEL: 'warn', LEVANTER_THREADS: String(threads) },
    prefix: '{"variant"',
    liveStderr: true,
    timeoutMs: RUN_TIMEOUT_MS,
  }
}

/** The PyTorch reference at GPT-2 `size` (bench/processes.ts's run, with vocabulary, context and batch). */
function pytorchSpec(python: string, size: SizeName, threads: number, steps: number): RunSpec {
  const { config: c, batch } = GPT2_SIZES[size]
  const spec = pytorchRun(python, threads, String(steps), c)
  return {
    ...spec,
    label: `pytorch gpt2-${size} ${threads} thread${threads > 1 ? 's' : ''}`,
    args: [...spec.args, '--vocab', String(c.vocabSize), '--context', String(c.seqLen), '--batch', String(batch)],
    timeoutMs: RUN_TIMEOUT_MS,
  }
}

type Emit = typeof emitLine
const ok = (o: Outcome, errors: string[]): Result | undefined => {
  if (o.ok) return o.result
  errors.push(o.error)
  process.stderr.write(`gpt2-sizes bench: ${o.error}\n`)
  return undefined
}
const tps = (r: Result | undefined) => r?.tokensPerSec

/**
 * The GPT-2-size rows: per size, `rounds` interleaved rounds of levanter 1 thread, PyTorch 1 thread, each 2-core
 * layout of levanter, PyTorch 2 threads. Lines go to `emit` (the rigging's by default). Returns the errors of the
 * runs that failed (their rows are left out).
 */
export function benchGpt2Sizes(emit: Emit = emitLine): string[] {
  const rounds = setting('LEVANTER_BENCH_GPT2_ROUNDS', 3, 0)
  const steps = setting('LEVANTER_BENCH_GPT2_STEPS', 3, 1)
  const layouts = layoutsSetting()
  const errors: string[] = []
  if (rounds === 0) return errors
  const sizes = sizesSetting()
  const loaded = setting('LEVANTER_BENCH_GPT2_LOADED', 1, 0) > 0
  const torch = findTorch()
  const python = 'python' in torch ? torch.python : undefined
  if (!python) process.stderr.write(`gpt2-sizes bench: no PyTorch reference (${'why' in torch ? torch.why : ''})\n`)
  const b = 'levanter'
  for (const size of sizes) {
    type Row = { lev1?: Result; pt1?: Result; best2?: number; bestLayout?: Layout; pt2?: Result; load: number }
    const rows: (Row & { levBusy?: Result; ptBusy?: Result; loadBusy?: number })[] = []
    const byLayout = new Map<Layout, number[]>(layouts.map((l) => [l, []]))
    for (let r = 0; r < rounds; r++) {
      const lev1 = ok(tryRun(levanterSpec(size, steps, 'threads1')), errors)
      const pt1 = python ? ok(tryRun(pytorchSpec(python, size, 1, steps)), errors) : undefined
      let best2: number | undefined, bestLayout: Layout | undefined
      for (const l of layouts) {
        const t = tps(ok(tryRun(levanterSpec(size, steps, l)), errors))
        if (t === undefined) continue
        byLayout.get(l)!.push(t)
        if (best2 === undefined || t > best2) [best2, bestLayout] = [t, l]
      }
      const pt2 = python ? ok(tryRun(pytorchSpec(python, size, 2, steps)), errors) : undefined
      const load = os.loadavg()[0]!
      let levBusy: Result | undefined, ptBusy: Result | undefined, loadBusy: number | undefined
      if (loaded && size === 'small') {
        const busy = busyLoad()
        try {
          levBusy = ok(tryRun(levanterSpec(size, steps, 'threads1')), errors)
          ptBusy = python ? ok(tryRun(pytorchSpec(python, size, 1, steps)), errors) : undefined
          loadBusy = os.loadavg()[0]!
        } finally {
          busy.kill('SIGKILL')
        }
      }
      rows.push({ lev1, pt1, best2, bestLayout, pt2, load, levBusy, ptBusy, loadBusy })
      process.stderr.write(
        `gpt2-sizes bench: ${size} round ${r + 1}: 1 core levanter ${tps(lev1)?.toFixed(1) ?? '-'} / PyTorch ` +
          `${tps(pt1)?.toFixed(1) ?? '-'} tokens/s; ` +
          `2 cores levanter ${best2?.toFixed(1) ?? '-'} (${bestLayout ?? '-'})` +
          ` / PyTorch ${tps(pt2)?.toFixed(1) ?? '-'}; load ${load.toFixed(1)}` +
          (loadBusy !== undefined
            ? `; loaded 1 core ${tps(levBusy)?.toFixed(1) ?? '-'} / ${tps(ptBusy)?.toFixed(1) ?? '-'}`
            : '') +
          '\n',
      )
    }
    const med = (xs: (number | undefined)[]) => {
      const ys = xs.filter((x): x is number => x !== undefined && Number.isFinite(x))
      return ys.length ? median(ys) : undefined
    }
    const line = (
      metric: string,
      value: number | undefined,
      unit: string,
      baseline?: number,
      lowerIsBetter = false,
    ) => {
      if (value !== undefined)
        emit({ bench: b, metric, value, unit, ...(baseline !== undefined ? { baseline, lowerIsBetter } : {}) })
    }
    const s = `gpt2_${size}`
    line(`${s}_load_average_1m`, med(rows.map((x) => x.load)), 'runnable')
    const lev1 = med(rows.map((x) => tps(x.lev1))),
      pt1 = med(rows.map((x) => tps(x.pt1)))
    line(`train_tokens_per_s_${s}_1_core`, lev1, 'tokens/s', pt1)
    line(`train_model_flops_per_s_${s}_1_core`, med(rows.map((x) => x.lev1?.flopsPerSec)), 'FLOP/s')
    line(`train_ratio_vs_pytorch_${s}_1_core`, med(rows.map((x) => ratio(tps(x.lev1), tps(x.pt1)))), 'x')
    // the same on CPU time per step (PyTorch's ÷ levanter's): what a shared machine's scheduling cannot inflate
    line(
      `train_cpu_time_ratio_vs_pytorch_${s}_1_core`,
      med(rows.map((x) => ratio(x.pt1?.cpuMsPerStep, x.lev1?.cpuMsPerStep))),
      'x',
    )
    for (const [l, ts] of byLayout) line(`train_tokens_per_s_${s}_2_cores_${l}`, med(ts), 'tokens/s')
    line(`pytorch_train_tokens_per_s_${s}_2_threads`, med(rows.map((x) => tps(x.pt2))), 'tokens/s')
    line(`train_ratio_vs_pytorch_${s}_2_cores`, med(rows.map((x) => ratio(x.best2, tps(x.pt2)))), 'x')
    const rss = med(rows.map((x) => x.lev1?.peakRssMiB)),
      ptRss = med(rows.map((x) => x.pt1?.peakRssMiB))
    line(`peak_rss_${s}_1_core`, rss, 'MiB', ptRss, true) // ratio: PyTorch's ÷ levanter's
    line(`peak_rss_ratio_${s}`, med(rows.map((x) => ratio(x.pt1?.peakRssMiB, x.lev1?.peakRssMiB))), 'x')
    if (!rows.some((x) => x.loadBusy !== undefined)) continue
    line(`${s}_load_average_1m_loaded`, med(rows.map((x) => x.loadBusy)), 'runnable')
    line(`train_tokens_per_s_${s}_1_core_loaded`, med(rows.map((x) => tps(x.levBusy))), 'tokens/s')
    line(`pytorch_train_tokens_per_s_${s}_1_core_loaded`, med(rows.map((x) => tps(x.ptBusy))), 'tokens/s')
    const busyRatio = (x: (typeof rows)[number]) => ratio(tps(x.levBusy), tps(x.ptBusy))
    line(`train_ratio_vs_pytorch_${s}_1_core_loaded`, med(rows.map(busyRatio)), 'x')
    line(
      `train_loaded_retention_${s}_1_core`,
      med(rows.map((x) => ratio(busyRatio(x), ratio(tps(x.lev1), tps(x.pt1))))),
      'x',
    )
  }
  return errors
}
const ratio = (a: number | undefined, b: number | undefined) => (a !== undefined && b ? a / b : undefined)

/** Child: train GPT-2 `size` for 1 + `steps` steps (the first untimed) and print one JSON line. */
async function childTrain(size: SizeName, steps: number, dp2: boolean): Promise<void> {
  const { initBackend } = await import('../src/backend.js')
  const { Dataset } = await import('../src/data/dataset.js')
  const { Gpt2LM } = await import('../src/models/lm.js')
  const { Pipeline } = await import('../src/pipeline.js')
  const { MemoryTracker } = await import('../src/trackers.js')
  const { Trainer } = await import('../src/trainer.js')
  const { config, batch } = GPT2_SIZES[size]
  const info = await initBackend()
  const model = new Gpt2LM(config, 0)
  // The token stream of bench/variant.ts and the PyTorch reference, in this vocabulary.
  const tokens = Array.from({ length: 200_000 }, (_, i) => (i * 7919 + (i >> 7)) % config.vocabSize)
  const dataset = Dataset.fromTokens(tokens, { evalFraction: 0 })
  const rates: number[] = [],
    stepMs: number[] = [],
    cpuMs: number[] = []
  let cpu = process.cpuUsage()
  const trainer = new Trainer(
    { learningRate: 1e-3, batchSize: batch, ...(dp2 ? { mesh: { data: 2 } } : {}) },
    {
      trackers: [new MemoryTracker()],
      hooks: [
        {
          every: 1,
          run: (i) => {
            rates.push(i.tokensPerSec)
            stepMs.push(i.seconds * 1000)
            const used = process.cpuUsage(cpu) // every thread's, since the last step ended
            cpuMs.push((used.user + used.system) / 1000)
            cpu = process.cpuUsage()
          },
        },
      ],
    },
  )
  await new Pipeline({ dataset, model, trainer, maxSteps: steps + 1 }).run()
  const tokensPerSec = median(rates.slice(1))
  console.log(
    JSON.stringify({
      variant: `levanter-gpt2-${size}${dp2 ? '-dp2' : ''}`,
      backend: info.name,
      gemm: info.gemm,
      threads: Number(process.env.LEVANTER_THREADS ?? 0),
      params: model.numParams(),
      tokensPerSec,
      flopsPerSec: tokensPerSec * model.flopsPerToken(config.seqLen),
      stepMs: median(stepMs.slice(1)),
      cpuMsPerStep: median(cpuMs.slice(1)),
      rounds: rates.slice(1),
      peakRssMiB: process.resourceUsage().maxRSS / 1024,
    }),
  )
}

/** Child: where one GPT-2-small step goes. Wall time of the gradients and of AdamW, then one step under tf.profile. */
async function childProfile(): Promise<void> {
  const tf = await import('@tensorflow/tfjs')
  const { initBackend } = await import('../src/backend.js')
  const { printTally, tally, withShapes } = await import('./profile-report.js')
  const { Dataset } = await import('../src/data/dataset.js')
  const { maskCount } = await import('../src/data/batch.js')
  const { Gpt2LM } = await import('../src/models/lm.js')
  const { AdamW, AdamWConfig } = await import('../src/optim/adamw.js')
  const { computeGrads } = await import('../src/train-step.js')
  const c = GPT2_SMALL
  const info = await initBackend()
  console.log(`backend ${info.name}, gemm ${info.gemm}, native ${JSON.stringify(info.native ?? null)}`)
  const model = new Gpt2LM(c, 0)
  const opt = new AdamW(AdamWConfig.parse({}), model)
  const tokens = Array.from({ length: 200_000 }, (_, i) => (i * 7919 + (i >> 7)) % c.vocabSize)
  const dataset = Dataset.fromTokens(tokens, { evalFraction: 0 })
  const step = async (s: number) => {
    const b = await dataset.trainBatch(s, GPT2_BATCH, c.seqLen, 0)
    const t0 = performance.now()
    const { grads } = computeGrads(model, b, maskCount(b))
    const t1 = performance.now()
    opt.apply(grads, 1e-3)
    const t2 = performance.now()
    tf.dispose([...grads.values()])
    return { gradsMs: t1 - t0, applyMs: t2 - t1, disposeMs: performance.now() - t2 }
  }
  await step(0)
  console.log(JSON.stringify(await step(1)))
  let wall: Awaited<ReturnType<typeof step>> | undefined
  const prof = await tf.profile(async () => {
    wall = await step(2)
    return []
  })
  const total = prof.kernels.reduce((t, k) => t + (k.kernelTimeMs as number), 0)
  console.log(`profiled step: ${JSON.stringify(wall)}`)
  console.log(`kernels: ${prof.kernels.length}, summed ${total.toFixed(0)} ms (custom-gradient scopes included)`)
  printTally(tally(prof.kernels, withShapes).slice(0, 60), 1)
  console.log('by kernel (custom-gradient scopes left out):')
  printTally(
    tally(prof.kernels, (k) => (k.name === 'unnamed scope' ? undefined : k.name)),
    1,
  )
}

async function child(args: string[]): Promise<void> {
  const [what, size, stepsArg, flag] = args
  if (what === 'profile') return childProfile()
  if (what !== 'train' || size === undefined || !isSize(size))
    throw new Error(
      `gpt2-sizes.ts: usage: --child train ${Object.keys(GPT2_SIZES).join('|')} [steps] [--dp2] | --child profile`,
    )
  const steps = Number(stepsArg ?? 3)
  if (!Number.isInteger(steps) || steps < 1) throw new Error(`gpt2-sizes.ts: steps must be ≥ 1, got "${stepsArg}"`)
  return childTrain(size, steps, flag === '--dp2')
}

if (process.argv[1] && resolve(process.argv[1]) === thisFile) {
  const i = process.argv.indexOf('--child')
  if (i >= 0) {
    await child(process.argv.slice(i + 1))
    process.exit(0)
  }
  process.stderr.write(
    `gpt2-sizes bench: load ${os
      .loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')}\n`,
  )
  const errors = benchGpt2Sizes()
  if (errors.length) process.exitCode = 1
}
