/** @module Gradients of a batch, accumulated over microbatches, as named tensors. */
import * as tf from '@tensorflow/tfjs'
import { sliceBatch } from './data/batch.js'
import type { Batch } from './data/batch.js'
import { maskedCrossEntropy, withAuxLoss } from './loss.js'
import type { CausalLM } from './models/lm.js'
import { heapFloats } from './kernels/wasm-heap.js'

/** Loss and gradients of one batch; the caller owns (and disposes) the gradient tensors. */
export type Grads = { readonly loss: number; readonly grads: Map<string, tf.Tensor> }

/** A batch's ids, targets and loss mask as tensors [B, T] (the caller disposes them, or runs inside `tf.tidy`). */
export function batchTensors(b: Batch): { ids: tf.Tensor2D; targets: tf.Tensor2D; mask: tf.Tensor2D } {
  const shape: [number, number] = [b.batchSize, b.seqLen]
  return {
    ids: tf.tensor2d(b.inputs, shape, 'int32'),
    targets: tf.tensor2d(b.targets, shape, 'int32'),
    mask: tf.tensor2d(b.mask, shape),
  }
}

/**
 * Σ over microbatches of ∇(Σ mask·nll / denominator), the gradients summed on the backend; each
 * microbatch's loss (a scalar) goes to `onLoss`, which owns it. Returns the gradients and the bytes
 * of batch data uploaded.
 */
function accumulateGrads(
  model: CausalLM,
  batch: Batch,
  denominator: number,
  microbatches: number,
  onLoss: (value: tf.Scalar) => void,
): { grads: Map<string, tf.Tensor>; bytesToDevice: number } {
  const names = [...model.params.keys()]
  const vars = names.map((n) => model.params.get(n)!)
  const per = Math.ceil(batch.batchSize / microbatches)
  let acc: tf.Tensor[] | undefined
  let bytesToDevice = 0
  for (let from = 0; from < batch.batchSize; from += per) {
    const mb = sliceBatch(batch, from, Math.min(batch.batchSize, from + per))
    bytesToDevice += mb.inputs.byteLength + mb.targets.byteLength + 4 * mb.mask.length
    const { value, grads } = tf.tidy(() => {
      const { ids, targets, mask } = batchTensors(mb)
      return tf.variableGrads(() => {
        const { logits, aux } = model.forwardTraining(ids)
        return withAuxLoss(maskedCrossEntropy(logits, targets, mask, denominator), aux, mask, denominator)
      }, vars)
    })
    onLoss(value)
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
  return { grads: out, bytesToDevice }
}

/**
 * Σ over microbatches of ∇(Σ mask·nll / denominator). With denominator = the global batch's
 * mask count, microbatches and replicas add up to the gradient of the whole batch's mean loss.
 */
export function computeGrads(model: CausalLM, batch: Batch, denominator: number, microbatches = 1): Grads {
  let loss = 0
  const { grads } = accumulateGrads(model, batch, denominator, microbatches, (value) => {
    loss += value.dataSync()[0]!
    value.dispose()
  })
  return { loss, grads }
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
  let loss: tf.Scalar | undefined
  const { grads, bytesToDevice } = accumulateGrads(model, batch, denominator, microbatches, (value) => {
    if (!loss) loss = value
    else {
      const prev = loss
      loss = tf.add(prev, value) as tf.Scalar
      tf.dispose([prev, value])
    }
  })
  return { loss: loss!, grads, bytesToDevice }
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
