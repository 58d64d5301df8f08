/**
 * One benchmark variant in its own process (so peak RSS is its own). Prints one JSON line:
 * { tokensPerSec, flopsPerSec, peakRssMiB, ... }. Variants: stock, levanter, levanter-dp2, generate,
 * gemm (GFLOP/s of the reference config's MLP products on each GEMM). The levanter variants train on
 * the GEMM `LEVANTER_GEMM` names (the default: native where it runs, kernels/wasm-gemm.ts).
 * `--d-model`, `--layers` and `--heads` change the model's size (the size sweep of levanter.bench.ts).
 * `node --import tsx bench/variant.ts levanter 3 --d-model 512 --layers 6 --heads 8`
 */
import { parseArgs } from 'node:util'
import * as tf from '@tensorflow/tfjs'
import { initBackend } from '../src/backend.js'
import { Dataset } from '../src/data/dataset.js'
import { generate } from '../src/generate.js'
import { unregisterLevanterKernels } from '../src/kernels/register.js'
import { nativeGemm } from '../src/kernels/native-gemm.js'
import { selectGemm } from '../src/kernels/wasm-gemm.js'
import { Gpt2LM } from '../src/models/lm.js'
import { MeshEngine } from '../src/parallel/mesh-engine.js'
import type { MeshStepPhases } from '../src/parallel/step-record.js'
import { Pipeline } from '../src/pipeline.js'
import { MemoryTracker } from '../src/trackers.js'
import { Trainer } from '../src/trainer.js'
import { stockTrainStep } from './stock-gpt2.js'

export const REFERENCE = { vocabSize: 512, seqLen: 128, dModel: 256, nLayers: 4, nHeads: 4 }
const BATCH = 16
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
const rssMiB = () => process.resourceUsage().maxRSS / 1024
const cpuSeconds = () => {
  const u = process.cpuUsage()
  return (u.user + u.system) / 1e6
}

const USAGE =
  'usage: variant.ts stock|levanter|levanter-dp2|generate|gemm [steps] [--d-model N] [--layers N] [--heads N]'
const usage = (why: string): never => {
  console.error(`variant.ts: ${why}\n${USAGE}`)
  process.exit(2)
}
const cli = (() => {
  try {
    return parseArgs({
      allowPositionals: true,
      options: { 'd-model': { type: 'string' }, layers: { type: 'string' }, heads: { type: 'string' } },
    })
  } catch (e) {
    return usage((e as Error).message)
  }
})()
const count = (name: string, v: string | undefined, dflt: number): number => {
  if (v === undefined) return dflt
  const n = Number(v)
  return Number.isInteger(n) && n > 0 ? n : usage(`${name} must be a positive integer, got "${v}"`)
}
const [variant, stepsArg] = cli.positionals
if (!['stock', 'levanter', 'levanter-dp2', 'generate', 'gemm'].includes(variant ?? ''))
  usage(variant === undefined ? 'no variant named' : `unknown variant "${variant}"`)
const steps = count('steps', stepsArg, 3)
/** The model this run trains: the reference config, or the size the flags name. */
const CONFIG = {
  ...REFERENCE,
  dModel: count('--d-model', cli.values['d-model'], REFERENCE.dModel),
  nLayers: count('--layers', cli.values.layers, REFERENCE.nLayers),
  nHeads: count('--heads', cli.values.heads, REFERENCE.nHeads),
}
if (CONFIG.dModel % CONFIG.nHeads !== 0)
  usage(`--d-model ${CONFIG.dModel} is not a multiple of --heads ${CONFIG.nHeads}`)
const info = await initBackend()
const model = new Gpt2LM(CONFIG, 0)
const flopsPerToken = model.flopsPerToken(CONFIG.seqLen)
const tokens = Array.from({ length: 200_000 }, (_, i) => (i * 7919 + (i >> 7)) % 512)
const dataset = Dataset.fromTokens(tokens, { evalFraction: 0 })
const out: Record<string, unknown> = {
  variant,
  backend: info.name,
  simd: info.simd,
  gemm: info.gemm,
  model: { dModel: CONFIG.dModel, nLayers: CONFIG.nLayers, nHeads: CONFIG.nHeads, params: model.numParams() },
}

if (variant === 'stock') {
  unregisterLevanterKernels()
  out.gemm = 'stock' // the backend's own kernels, XNNPACK for plain 2-D products
  const step = stockTrainStep(model, tf.train.adam(1e-3, 0.9, 0.95))
  const times: number[] = [],
    cpu: number[] = []
  for (let s = 0; s <= steps; s++) {
    const b = await dataset.trainBatch(s, BATCH, CONFIG.seqLen, 0)
    const ids = tf.tensor2d(b.inputs, [BATCH, CONFIG.seqLen], 'int32'),
      tg = tf.tensor2d(b.targets, [BATCH, CONFIG.seqLen], 'int32')
    const t = performance.now(),
      c = cpuSeconds()
    step(ids, tg)
    if (s > 0) times.push((performance.now() - t) / 1000) // step 0 warms up
    if (s > 0) cpu.push(cpuSeconds() - c)
    tf.dispose([ids, tg])
  }
  out.tokensPerSec = (BATCH * CONFIG.seqLen) / median(times)
  out.tokensPerCpuSec = (BATCH * CONFIG.seqLen) / median(cpu)
} else if (variant === 'levanter' || variant === 'levanter-dp2') {
  const tps: number[] = []
  const trainer = new Trainer(
    { learningRate: 1e-3, batchSize: BATCH, ...(variant === 'levanter-dp2' ? { mesh: { data: 2 } } : {}) },
    { trackers: [new MemoryTracker()], hooks: [{ every: 1, run: (i) => void tps.push(i.tokensPerSec) }] },
  )
  const pipeline = new Pipeline({ dataset, model, trainer, maxSteps: steps + 1 })
  const stepMs: number[] = [],
    cpu: number[] = []
  let lastCpu = cpuSeconds()
  trainer.addHook(1, (i) => {
    stepMs.push(i.seconds * 1000)
    cpu.push(cpuSeconds() - lastCpu) // this process, from hook to hook: the step plus loading its batch
    lastCpu = cpuSeconds()
  })
  trainer.addHook(steps + 1, async () => {
    if (!(pipeline.engine instanceof MeshEngine)) return
    const group = pipeline.engine.group
    out.replicaPeakRssMiB = Math.max(...(await group.broadcast.memory()).map((m) => m.peakRssMiB))
    // Per-step phases (median over the timed steps) of the slowest replica, and what the driver adds on top.
    const phases = (await group.broadcast.phases()).map((ps) => ps.slice(1))
    const med = (k: keyof MeshStepPhases) => Math.max(...phases.map((ps) => median(ps.map((p) => p[k]))))
    const replica = { grads: med('grads'), flatten: med('flatten'), allReduce: med('dataReduce'), apply: med('apply') }
    // The driver's share of a step: the step's wall time less the longest replica's (phases of step i are entry i).
    const total = (p: MeshStepPhases) => p.grads + p.flatten + p.dataReduce + p.apply
    const driver = stepMs.slice(1).map((ms, i) => ms - Math.max(...phases.map((ps) => total(ps[i]!))))
    out.phasesMs = { ...replica, driver: median(driver), replicaCpu: med('cpu') }
    // Per CPU-second of the busiest replica: the rate were each replica to have a core of its own (communication waits
    // excluded).
    out.tokensPerCpuSec = (BATCH * CONFIG.seqLen) / (med('cpu') / 1000)
  })
  await pipeline.run()
  out.tokensPerSec = median(tps.slice(1))
  if (variant === 'levanter') out.tokensPerCpuSec = (BATCH * CONFIG.seqLen) / median(cpu.slice(1))
  out.stepMs = median(stepMs.slice(1))
} else if (variant === 'generate') {
  const prompt = Array.from({ length: 16 }, (_, i) => i)
  for (const useCache of [true, false]) {
    generate(model, prompt, { maxNewTokens: 4, useCache, temperature: 0 })
    const t = performance.now()
    const g = generate(model, prompt, { maxNewTokens: 64, useCache, temperature: 0 })
    out[useCache ? 'cachedTokensPerSec' : 'uncachedTokensPerSec'] = g.tokens.length / ((performance.now() - t) / 1000)
  }
} else if (variant === 'gemm') {
  // The first MLP product (x [2048, 256] · w [256, 1024]) and its weight gradient xᵀ · dy, on
  // levanter's GEMM (flagged) and on XNNPACK (which needs xᵀ made first): GFLOP/s, median of `steps`.
  const x = tf.randomNormal([BATCH * CONFIG.seqLen, CONFIG.dModel]),
    w = tf.randomNormal([CONFIG.dModel, 4 * CONFIG.dModel])
  const dy = tf.randomNormal([BATCH * CONFIG.seqLen, 4 * CONFIG.dModel])
  const gflops = (f: () => tf.Tensor) => {
    const ms: number[] = []
    for (let i = 0; i <= Math.max(steps, 3); i++) {
      const t = performance.now()
      f().dispose()
      if (i > 0) ms.push(performance.now() - t) // the first call compiles and warms up
    }
    return (2 * x.shape[0]! * x.shape[1]! * w.shape[1]!) / median(ms) / 1e6
  }
  for (const g of [...(nativeGemm().addon ? (['native'] as const) : []), 'fma', 'simd', 'xnnpack'] as const) {
    selectGemm(g)
    out[`${g}Forward`] = gflops(() => tf.matMul(x, w))
    out[`${g}WeightGrad`] = gflops(() =>
      g === 'xnnpack' ? tf.tidy(() => tf.matMul(tf.transpose(x), dy)) : tf.matMul(x, dy, true, false),
    )
  }
}
if (typeof out.tokensPerSec === 'number') out.flopsPerSec = out.tokensPerSec * flopsPerToken
out.peakRssMiB = rssMiB()
console.log(JSON.stringify(out))
process.exit(0)
