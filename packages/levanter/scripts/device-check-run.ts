/**
 * The device check's run, once scripts/device-check.ts has read its flags: `pnpm device-check
 * [--software] [--quick] [--steps N] [--batch N] [--peak-tflops X] [--mesh L]`.
 * Finds the GPU adapter (bringing the Vulkan loader from the registry's SwiftShader package when the
 * machine lacks one), checks levanter's ops, its WGSL kernels (src/webgpu/kernels/: softmax,
 * LayerNorm, column sums, AdamW) and a model's loss and gradients on the GPU against the cpu
 * backend (where the composite ops run), then trains the quickstart's reference config and a
 * GPT-2-small-sized model for a fixed number of steps on the device-resident step. Between the two,
 * fsdp `{ data: 2 }` and `{ model: 2 }` members, each its own process on the GPU, must match one
 * process within 1e-4 (device-mesh-check.ts; `--mesh fsdp` or `--mesh model` checks one). Prints one
 * JSON line per result; exits 1 when a check fails (a member off the GPU included) or no GPU adapter
 * is found, 2 on bad usage.
 *
 * --software accepts SwiftShader (no GPU); --quick shrinks both models so that SwiftShader runs them.
 */
import * as tf from '@tensorflow/tfjs'
import { initBackend } from '../src/backend.js'
import type { BackendInfo } from '../src/backend.js'
import { Dataset } from '../src/data/dataset.js'
import { LocalEngine } from '../src/engine.js'
import { maskedCrossEntropy } from '../src/loss.js'
import type { ModelConfigInput } from '../src/models/config.js'
import { columnSum } from '../src/kernels/column-sum.js'
import { fusedLayerNorm } from '../src/kernels/layer-norm.js'
import { fusedBiasSoftmax, fusedCausalSoftmax } from '../src/kernels/softmax.js'
import { causalBias } from '../src/models/layers.js'
import { createModel } from '../src/models/lm.js'
import { AdamWConfig } from '../src/optim/adamw.js'
import { DeviceAdamW } from '../src/optim/adamw-device.js'
import { loadVulkanLoader } from '../src/webgpu/adapter.js'
import { fp32PeakFlops } from '../src/webgpu/peak.js'
import { unpackSwiftShader } from '../src/webgpu/swiftshader.js'
import type { DeviceCheckLayout, DeviceCheckOptions } from './device-check-usage.js'
import { MESH_BATCH, MESH_TOLERANCE, meshEquality } from './device-mesh-check.js'
import type { MeshLayoutName } from './device-mesh-check.js'

const emit = (o: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(o)}\n`)

/** Largest |a − b| / (1 + |b|) over two arrays. */
function relErr(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let worst = 0
  for (let i = 0; i < b.length; i++) worst = Math.max(worst, Math.abs(a[i]! - b[i]!) / (1 + Math.abs(b[i]!)))
  return a.length === b.length ? worst : Infinity
}

type Case = { readonly name: string; readonly run: () => tf.Tensor | tf.Tensor[] }

/** Ops at levanter's shapes, and a model's loss and gradients: each computed on the GPU and on cpu. */
/** The batch and the GPT-2 model of the kernel cases (quick: also the shapes of the quick GPT-2-small training). */
const KERNEL_BATCH = 2
const kernelModel = (quick: boolean) =>
  quick
    ? ({ type: 'gpt2', vocabSize: 64, seqLen: 16, dModel: 32, nLayers: 2, nHeads: 4 } as const)
    : ({ type: 'gpt2', vocabSize: 1024, seqLen: 128, dModel: 256, nLayers: 2, nHeads: 4 } as const)

function cases(quick: boolean): Case[] {
  const model = kernelModel(quick)
  const B = KERNEL_BATCH,
    T = model.seqLen,
    D = model.dModel,
    V = model.vocabSize
  // Inputs are made inside each case, on the backend that runs it (tfjs's seeded random numbers come from the host,
  // so both backends see the same values).
  const x = () => tf.randomNormal([B, T, D], 0, 1, 'float32', 1)
  const w = () => tf.randomNormal([D, 4 * D], 0, 0.05, 'float32', 2)
  const q = () => tf.randomNormal([B, 4, T, D / 4], 0, 1, 'float32', 3)
  const ids = () =>
    tf.tensor2d(
      Array.from({ length: B * T }, (_, i) => (i * 7) % V),
      [B, T],
      'int32',
    )
  const table = () => tf.randomNormal([V, D], 0, 1, 'float32', 4)
  const causal = () => tf.mul(tf.sub(1, tf.linalg.bandPart(tf.ones([T, T]), -1, 0)), -1e9)
  const llama: ModelConfigInput = { ...model, type: 'llama' }
  const lossAndGrads = (cfg: ModelConfigInput) => () => {
    const m = createModel(cfg, 5)
    const targets = tf.tensor2d(
      Array.from({ length: B * T }, (_, i) => (i * 11) % V),
      [B, T],
      'int32',
    )
    const mask = tf.ones([B, T])
    const { value, grads } = tf.variableGrads(
      () => maskedCrossEntropy(m.forward(ids()), targets, mask, B * T),
      [...m.params.values()],
    )
    const out = [value, ...[...m.params.values()].map((p) => grads[p.name]!)]
    m.dispose()
    return out
  }
  // attention scores of the last R queries [B·H, R, T] (R = T − 3: rows and widths off any workgroup size)
  const scores = (R: number) =>
    tf.reshape(tf.slice(tf.matMul(q(), q(), false, true), [0, 0, T - R, 0], [B, 4, R, T]), [B * 4, R, T])
  const dScores = (R: number) => tf.randomNormal([B * 4, R, T], 0, 1, 'float32', 6)
  const withGrad = (f: (a: tf.Tensor) => tf.Tensor, x: tf.Tensor, dy: tf.Tensor) => [
    f(x),
    tf.grad((a: tf.Tensor) => tf.sum(tf.mul(f(a), dy)))(x),
  ]
  const scale = 1 / Math.sqrt(D / 4)
  const causalSoftmax = (R: number) => () =>
    withGrad(
      (a) => fusedCausalSoftmax(a, scale, T - R) ?? tf.softmax(tf.add(tf.mul(a, scale), causalBias(R, T, T - R))),
      scores(R),
      dScores(R),
    )
  const biasSoftmax = () => {
    const R = T - 3
    // causal at offset 3, and batch row 1 with its first key hidden (padding)
    const m = new Float32Array(B * R * T)
    for (let b = 0; b < B; b++)
      for (let t = 0; t < R; t++)
        for (let s = 0; s < T; s++) if (s > T - R + t || (b === 1 && s === 0)) m[(b * R + t) * T + s] = -1e9
    const bias = tf.tensor4d(m, [B, 1, R, T])
    return withGrad(
      (a) =>
        fusedBiasSoftmax(a, scale, bias) ??
        tf.reshape(tf.softmax(tf.add(tf.reshape(tf.mul(a, scale), [B, 4, R, T]), bias)), [B * 4, R, T]),
      scores(R),
      dScores(R),
    )
  }
  // three AdamW steps (the second unclipped) on the model's parameters: WGSL on the GPU, tensor ops on cpu
  const adamw = () => {
    const m = createModel(model, 6)
    const opt = new DeviceAdamW(AdamWConfig.parse({}), m)
    const out: tf.Tensor[] = []
    for (let s = 1; s <= 3; s++) {
      const grads = new Map(
        [...m.params].map(([n, p], i) => [
          n,
          tf.randomNormal(p.shape, 0, s === 2 ? 1e-4 : 0.1, 'float32', 100 * s + i),
        ]),
      )
      out.push(opt.apply(grads, 1e-2))
      tf.dispose([...grads.values()])
    }
    for (const [n, p] of m.params) out.push(tf.clone(p), tf.clone(opt.m.get(n)!), tf.clone(opt.v.get(n)!))
    opt.dispose()
    m.dispose()
    return out
  }
  return [
    { name: 'matMul [B·T, D]·[D, 4D]', run: () => tf.matMul(tf.reshape(x(), [B * T, D]), w()) },
    { name: 'matMul transposeB', run: () => tf.matMul(tf.reshape(x(), [B * T, D]), tf.transpose(w()), false, true) },
    { name: 'batchMatMul q·kᵀ', run: () => tf.matMul(q(), q(), false, true) },
    { name: 'masked softmax', run: () => tf.softmax(tf.add(tf.matMul(q(), q(), false, true), causal())) },
    {
      name: 'gelu (tanh)',
      run: () => {
        const v = x()
        return tf.mul(
          tf.mul(v, 0.5),
          tf.add(1, tf.tanh(tf.mul(0.7978845608, tf.add(v, tf.mul(0.044715, tf.pow(v, 3)))))),
        )
      },
    },
    {
      name: 'layer norm',
      run: () => {
        const v = x()
        const { mean, variance } = tf.moments(v, -1, true)
        return tf.div(tf.sub(v, mean), tf.sqrt(tf.add(variance, 1e-5)))
      },
    },
    { name: 'embedding gather', run: () => tf.gather(table(), ids()) },
    { name: `causal softmax kernel and gradient [${B * 4}, ${T}, ${T}]`, run: causalSoftmax(T) },
    { name: `causal softmax kernel and gradient [${B * 4}, ${T - 3}, ${T}]`, run: causalSoftmax(T - 3) },
    { name: `bias softmax kernel and gradient [${B * 4}, ${T - 3}, ${T}]`, run: biasSoftmax },
    {
      name: 'layer norm kernel and gradients (x, gain, bias)',
      run: () => {
        const xs = [x(), tf.randomNormal([D], 1, 0.5, 'float32', 7), tf.randomNormal([D], 0, 1, 'float32', 8)]
        const dy = tf.randomNormal([B, T, D], 0, 1, 'float32', 9)
        const ln = (a: tf.Tensor, g: tf.Tensor, b: tf.Tensor) => fusedLayerNorm(a, g, b, 1e-5)
        return [ln(xs[0]!, xs[1]!, xs[2]!), ...tf.grads((a, g, b) => tf.sum(tf.mul(ln(a, g, b), dy)))(xs)]
      },
    },
    {
      name: 'column sum kernel [1100, 37] (two passes)',
      run: () => columnSum(tf.randomNormal([1100, 37], 0, 1, 'float32', 10)),
    },
    { name: 'AdamW kernels, 3 steps (norms, parameters, moments)', run: adamw },
    { name: 'gpt2 loss and gradients', run: lossAndGrads(model) },
    { name: 'llama loss and gradients', run: lossAndGrads(llama) },
  ]
}

async function read(t: tf.Tensor | tf.Tensor[]): Promise<Float32Array[]> {
  const ts = Array.isArray(t) ? t : [t]
  const out: Float32Array[] = []
  for (const x of ts) out.push(new Float32Array(await x.data()))
  tf.dispose(ts)
  return out
}

async function kernelEquality(quick: boolean): Promise<boolean> {
  let ok = true
  const list = cases(quick)
  for (const c of list) {
    const gpu = await read(tf.tidy(c.run))
    await tf.setBackend('cpu')
    const cpu = await read(tf.tidy(c.run))
    await tf.setBackend('webgpu')
    const err = Math.max(...gpu.map((g, i) => relErr(g, cpu[i]!)))
    const pass = err < 1e-3
    ok &&= pass
    emit({ check: 'kernel', name: c.name, maxRelErr: err, pass })
  }
  return ok
}

async function train(
  label: string,
  cfg: ModelConfigInput,
  batch: number,
  steps: number,
  info: BackendInfo,
  peakTflops: number | undefined,
): Promise<void> {
  const model = createModel(cfg, 0)
  const seqLen = model.config.seqLen
  const vocab = model.config.vocabSize
  const tokens = Array.from({ length: batch * (seqLen + 1) * 4 }, (_, i) => (i * 7919) % vocab)
  const data = Dataset.fromTokens(tokens, { evalFraction: 0 })
  const engine = new LocalEngine(model, AdamWConfig.parse({}))
  let peakBytes = 0
  const times: number[] = []
  let loss = NaN
  try {
    for (let s = 0; s < steps + 2; s++) {
      const b = await data.trainBatch(s, batch, seqLen, 0)
      const t0 = performance.now()
      loss = (await engine.step(b, 1e-4)).loss
      if (s >= 2) times.push((performance.now() - t0) / 1000)
      const mem = tf.memory() as tf.MemoryInfo & { numBytesAllocatedInGPU?: number }
      peakBytes = Math.max(peakBytes, mem.numBytesAllocatedInGPU ?? mem.numBytes)
    }
  } finally {
    await engine.close()
    model.dispose()
  }
  times.sort((a, b) => a - b)
  const median = times[Math.floor(times.length / 2)]!
  const tokensPerSec = (batch * seqLen) / median
  const flops = tokensPerSec * model.flopsPerToken(seqLen)
  const peak =
    peakTflops !== undefined ? peakTflops * 1e12 : fp32PeakFlops(`${info.adapter?.description} ${info.adapter?.device}`)
  emit({
    check: 'train',
    model: label,
    params: [...model.specs].reduce((n, s) => n + s.shape.reduce((a, b) => a * b, 1), 0),
    batch,
    seqLen,
    steps,
    medianStepSeconds: median,
    tokensPerSec,
    modelTflops: flops / 1e12,
    mfu: peak ? flops / peak : null,
    fp32PeakTflops: peak ? peak / 1e12 : null,
    peakGpuBytes: peakBytes,
    hostDeviceBytesPerStep: engine.lastStep,
    finalLoss: loss,
  })
}

// The layouts the usage accepts are the mesh case's (tsc fails here when the two lists part).
type SameNames = [DeviceCheckLayout] extends [MeshLayoutName]
  ? [MeshLayoutName] extends [DeviceCheckLayout]
    ? true
    : never
  : never
const sameNames: SameNames = true

/** Run every check per `o` (flags already read and checked); exits 0 when all pass, 1 otherwise. */
export async function runDeviceCheck(o: DeviceCheckOptions): Promise<void> {
  void sameNames
  const started = performance.now()
  // Without a Vulkan loader on the machine, the one shipped with SwiftShader serves the GPU's driver too.
  let brought: string | undefined
  if (loadVulkanLoader() === undefined) {
    brought = unpackSwiftShader().loader
    emit({ check: 'vulkan-loader', brought, ok: loadVulkanLoader(brought) !== undefined })
  }
  const info = await initBackend(o.software ? 'webgpu' : undefined)
  emit({ check: 'adapter', backend: info.name, adapter: info.adapter ?? null })
  if (info.name !== 'webgpu') {
    process.stderr.write(
      'device-check: no GPU adapter found (is the NVIDIA Vulkan driver installed, and does the container expose ' +
        'the graphics capability?); --software runs the check on SwiftShader\n',
    )
    process.exit(1)
  }
  let ok = await kernelEquality(o.quick)
  // fsdp and tensor-parallel members, each its own process on this GPU, against one process. Quick, the reference
  // training below has this model's shapes (and batch): this process's shaders for it compile once, here.
  const tiny: ModelConfigInput = { type: 'gpt2', vocabSize: 32, seqLen: 8, dModel: 16, nLayers: 1, nHeads: 2 }
  const meshModel: ModelConfigInput = o.quick
    ? tiny
    : { type: 'gpt2', vocabSize: 512, seqLen: 64, dModel: 64, nLayers: 2, nHeads: 4 }
  for (const m of await meshEquality(meshModel, info, brought, o.mesh)) {
    emit(m)
    if (!m.pass)
      process.stderr.write(
        `device-check: FAILED mesh ${m.layout}: ` +
          (m.error ?? `${m.steps} steps, errors loss ${m.maxLossErr}, gradient norm ${m.maxGradNormErr}, `) +
          (m.error ? '' : `weights ${m.maxWeightErr} (tolerance ${MESH_TOLERANCE})`) +
          '\n',
      )
    ok &&= m.pass
  }
  const reference: ModelConfigInput = o.quick
    ? tiny
    : { type: 'gpt2', vocabSize: 512, seqLen: 128, dModel: 128, nLayers: 2, nHeads: 4 }
  // quick: the kernel cases' model, whose shaders (forward, backward, AdamW) compiled there
  const small: ModelConfigInput = o.quick
    ? kernelModel(true)
    : { type: 'gpt2', vocabSize: 50257, seqLen: 1024, dModel: 768, nLayers: 12, nHeads: 12 }
  await train('reference', reference, o.quick ? MESH_BATCH : 16, o.steps, info, o.peakTflops)
  await train('gpt2-small', small, o.quick ? KERNEL_BATCH : o.batch, o.steps, info, o.peakTflops)
  emit({ check: 'done', ok, seconds: (performance.now() - started) / 1000 })
  process.exit(ok ? 0 : 1)
}
