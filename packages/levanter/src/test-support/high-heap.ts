/**
 * A process for the heap-offset test: fills the wasm heap past 2 GiB with a ballast tensor,
 * then runs levanter's wasm kernels on tensors that live above it, and prints one JSON line
 * `{ gemm, heapBytes, offset, ok, mismatch? }` comparing each result with plain JS or the cpu backend.
 */
import * as tf from '@tensorflow/tfjs'
import { initBackend } from '../backend.js'
import type { Batch } from '../data/batch.js'
import { registerLevanterKernels, unregisterLevanterKernels } from '../kernels/register.js'
import { WasmHeap, type WasmBackendLike } from '../kernels/wasm-heap.js'
import { Gpt2LM } from '../models/lm.js'
import { computeGrads } from '../train-step.js'

const { gemm } = await initBackend('wasm')
const ballast = tf.zeros([600 * 1024 * 1024]) // 2.34 GiB of float32
const [A, B] = [48, 80]
const values = Float32Array.from({ length: A * B }, (_, i) => (i % 97) - 48.5)
const x = tf.tensor2d(values, [A, B])
const heap = new WasmHeap(tf.backend() as unknown as WasmBackendLike)
const offset = heap.offset(x)
const t = tf.transpose(x, [1, 0]).dataSync()
let mismatch: string | undefined
for (let i = 0; i < A && !mismatch; i++) {
  for (let j = 0; j < B; j++) {
    if (t[j * A + i] !== values[i * B + j]) {
      mismatch = `transpose [${j}, ${i}]: ${t[j * A + i]} ≠ ${values[i * B + j]}`
      break
    }
  }
}
// A product above 2 GiB through the GEMM: x · xᵀ against a float64 sum.
const p = tf.matMul(x, x, false, true).dataSync()
for (let i = 0; i < A && !mismatch; i++) {
  let s = 0
  for (let k = 0; k < B; k++) s += values[i * B + k]! * values[i * B + k]!
  if (Math.abs(p[i * A + i]! - s) > 1e-3 * Math.abs(s)) mismatch = `matMul [${i}, ${i}]: ${p[i * A + i]} ≠ ${s}`
}
// A whole GPT-2 gradient above 2 GiB (slices, splits, GELU, LayerNorm, bias sums, transposes,
// products) against the stock cpu backend's.
const cfg = { vocabSize: 32, seqLen: 8, dModel: 32, nLayers: 2, nHeads: 2 }
const n = 3 * cfg.seqLen
const ids = Int32Array.from({ length: n }, (_, i) => (i * 7 + 3) % 32)
const batch: Batch = {
  batchSize: 3,
  seqLen: cfg.seqLen,
  inputs: ids,
  targets: ids.map((v) => (v + 1) % 32),
  mask: new Float32Array(n).fill(1),
}
const gradsOn = async (backend: 'wasm' | 'cpu') => {
  await tf.setBackend(backend)
  if (backend === 'cpu') unregisterLevanterKernels()
  const model = new Gpt2LM(cfg, 3)
  const { loss, grads } = computeGrads(model, batch, n)
  const out = new Map([...grads].map(([k, g]) => [k, g.dataSync().slice()]))
  tf.dispose([...grads.values()])
  model.dispose()
  return { loss, grads: out }
}
const heapBytes = heap.f32().buffer.byteLength
const ours = await gradsOn('wasm')
const ref = await gradsOn('cpu')
registerLevanterKernels()
if (!mismatch && Math.abs(ours.loss - ref.loss) > 1e-5) mismatch = `loss ${ours.loss} ≠ ${ref.loss}`
for (const [k, g] of ours.grads) {
  const r = ref.grads.get(k)!
  const i = g.findIndex((v, j) => !(Math.abs(v - r[j]!) < 1e-5 + 1e-3 * Math.abs(r[j]!)))
  if (!mismatch && i >= 0) mismatch = `gradient ${k}[${i}]: ${g[i]} ≠ ${r[i]}`
}
process.stdout.write(`${JSON.stringify({ gemm, heapBytes, offset, ok: mismatch === undefined, mismatch })}\n`)
await tf.setBackend('wasm')
ballast.dispose()
