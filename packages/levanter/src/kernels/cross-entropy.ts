/**
 * @module Masked cross-entropy as one native kernel (kernels/native-ops.ts): per row the log-sum-exp,
 * the loss and the gradient (softmax − one-hot, weighted by mask / denominator) in one pass over the
 * logits, the gradient kept for the backward pass. tfjs's softmaxCrossEntropy runs about a dozen
 * kernels over [B·T, V] forward and again backward, plus the one-hot matrix. The gradient is scaled by the
 * loss's own gradient only where that is not 1.
 */
import * as tf from '@tensorflow/tfjs'
import { nativeKernels } from './native-ops.js'
import { heapFloats, heapKernel } from './wasm-heap.js'

type Save = (s: tf.Tensor[]) => void

/**
 * Σ mask·(−log p(target)) / denominator (default Σ mask, at least 1) for logits [..., V], targets
 * and mask [...]; undefined where the native kernels do not run.
 */
export function fusedCrossEntropy(
  logits: tf.Tensor,
  targets: tf.Tensor,
  mask: tf.Tensor,
  denominator?: number,
): tf.Scalar | undefined {
  const native = nativeKernels()
  if (!native || logits.dtype !== 'float32') return undefined
  const V = logits.shape[logits.rank - 1]!
  const flat = tf.reshape(logits, [-1, V])
  if (!heapFloats(flat, tf.backend())) return undefined
  const t = targets.dtype === 'int32' ? (targets.dataSync() as Int32Array) : Int32Array.from(targets.dataSync())
  const m = mask.dtype === 'float32' ? (mask.dataSync() as Float32Array) : Float32Array.from(mask.dataSync())
  let count = 0
  for (const x of m) count += x
  const denom = denominator ?? Math.max(1, count)
  const f = tf.customGrad((...args: (tf.Tensor | Save)[]) => {
    const [x, save] = args as [tf.Tensor, Save]
    let loss = 0
    const grad = heapKernel(x.shape, [x], (g, xv) => {
      loss = native.crossEntropy(xv!, t, m, denom, g)
    })!
    save([grad])
    return {
      value: tf.scalar(loss),
      // d loss is 1 whenever the loss is the objective (or a term of a sum): the kernel's gradient as it is, shared
      // (copy-free Identity), not multiplied by 1 over all [B·T, V] logits; other scales multiply (the same bits)
      gradFunc: (dy: tf.Tensor | tf.Tensor[], saved: tf.Tensor[]) => {
        const d = dy as tf.Tensor
        return [d.size === 1 && d.dataSync()[0] === 1 ? tf.clone(saved[0]!) : tf.mul(saved[0]!, d)]
      },
    }
  })
  return f(flat) as tf.Scalar
}
