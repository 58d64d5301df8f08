/** @module Gradients of a batch, accumulated over microbatches, as named tensors. */
import * as tf from '@tensorflow/tfjs'
import { sliceBatch } from './data/batch.js'
import type { Batch } from './data/batch.js'
import { maskedCrossEntropy } from './loss.js'
import type { CausalLM } from './models/lm.js'
import { heapFloats } from './kernels/wasm-heap.js'

/** Loss and gradients of one batch; the caller owns (and disposes) the gradient tensors. */
export type Grads = { readonly loss: number; readonly grads: Map<string, tf.Tensor> }

/**
 * Σ over microbatches of ∇(Σ mask·nll / denominator). With denominator = the global batch's
 * mask count, microbatches and replicas add up to the gradient of the whole batch's mean loss.
 */
export function computeGrads(model: CausalLM, batch: Batch, denominator: number, microbatches = 1): Grads {
  const names = [...model.params.keys()]
  const vars = names.map((n) => model.params.get(n)!)
  const per = Math.ceil(batch.batchSize / microbatches)
  let loss = 0
  let acc: tf.Tensor[] | undefined
  for (let from = 0; from < batch.batchSize; from += per) {
    const mb = sliceBatch(batch, from, Math.min(batch.batchSize, from + per))
    const { value, grads } = tf.tidy(() => {
      const ids = tf.tensor2d(mb.inputs, [mb.batchSize, mb.seqLen], 'int32')
      const targets = tf.tensor2d(mb.targets, [mb.batchSize, mb.seqLen], 'int32')
      const mask = tf.tensor2d(mb.mask, [mb.batchSize, mb.seqLen])
      return tf.variableGrads(() => maskedCrossEntropy(model.forward(ids), targets, mask, denominator), vars)
    })
    loss += value.dataSync()[0]!
    value.dispose()
    const gs = names.map((n) => grads[model.params.get(n)!.name]!)
    if (!acc) acc = gs
    else {
      const prev = acc
      acc = prev.map((a, i) => tf.add(a, gs[i]!))
      tf.dispose([...prev, ...gs])
    }
  }
  const out = new Map<string, tf.Tensor>()
  names.forEach((n, i) => out.set(n, acc![i]!))
  return { loss, grads: out }
}

/**
 * {@link computeGrads} with the loss left on the device (a scalar the caller disposes): nothing is
 * read back. `bytesToDevice` counts the batch uploads.
 */
export function computeGradsOnDevice(
  model: CausalLM,
  batch: Batch,
  denominator: number,
  microbatches = 1,
): { loss: tf.Scalar; grads: Map<string, tf.Tensor>; bytesToDevice: number } {
  const names = [...model.params.keys()]
  const vars = names.map((n) => model.params.get(n)!)
  const per = Math.ceil(batch.batchSize / microbatches)
  let loss: tf.Scalar | undefined
  let acc: tf.Tensor[] | undefined
  let bytesToDevice = 0
  for (let from = 0; from < batch.batchSize; from += per) {
    const mb = sliceBatch(batch, from, Math.min(batch.batchSize, from + per))
    bytesToDevice += mb.inputs.byteLength + mb.targets.byteLength + 4 * mb.mask.length
    const { value, grads } = tf.tidy(() => {
      const ids = tf.tensor2d(mb.inputs, [mb.batchSize, mb.seqLen], 'int32')
      const targets = tf.tensor2d(mb.targets, [mb.batchSize, mb.seqLen], 'int32')
      const mask = tf.tensor2d(mb.mask, [mb.batchSize, mb.seqLen])
      return tf.variableGrads(() => maskedCrossEntropy(model.forward(ids), targets, mask, denominator), vars)
    })
    const gs = names.map((n) => grads[model.params.get(n)!.name]!)
    if (!loss) loss = value
    else {
      const prev = loss
      loss = tf.add(prev, value) as tf.Scalar
      tf.dispose([prev, value])
    }
    if (!acc) acc = gs
    else {
      const prev = acc
      acc = prev.map((a, i) => tf.add(a, gs[i]!))
      tf.dispose([...prev, ...gs])
    }
  }
  const out = new Map<string, tf.Tensor>()
  names.forEach((n, i) => out.set(n, acc![i]!))
  return { loss: loss!, grads: out, bytesToDevice }
}

/**
 * Flatten named gradients into one buffer (for all-reduce), in `names` order, with `extra` free
 * floats at the end. On wasm each gradient is copied straight off the heap (no intermediate
 * array); `into` (of the right length) is reused instead of allocating and zeroing a new buffer.
 */
export function flattenGrads(
  grads: ReadonlyMap<string, tf.Tensor>,
  names: readonly string[],
  extra = 0,
  into?: Float32Array,
): Float32Array {
  let n = extra
  for (const k of names) n += grads.get(k)!.size
  const out = into?.length === n ? into : new Float32Array(n)
  const backend = tf.backend()
  let o = 0
  for (const k of names) {
    const g = grads.get(k)!
    const d = heapFloats(g, backend) ?? (g.dataSync() as Float32Array)
    out.set(d, o)
    o += d.length
  }
  if (extra > 0) out.fill(0, o)
  return out
}
