/** @module Next-token cross-entropy with a loss mask (padding, document boundaries). */
import * as tf from '@tensorflow/tfjs'
import { fusedCrossEntropy } from './kernels/cross-entropy.js'

/**
 * `loss` plus a model's auxiliary loss per row `aux` [B] (models/layers.ts `ForwardResult`), each row weighted by
 * its masked tokens over `denominator` (as the cross-entropy is): microbatches and replicas add up to the whole
 * batch's value. Without `aux`, `loss` itself.
 */
export function withAuxLoss(
  loss: tf.Scalar,
  aux: tf.Tensor | undefined,
  mask: tf.Tensor,
  denominator?: number,
): tf.Scalar {
  if (!aux) return loss
  return tf.tidy(() => {
    const denom = denominator ?? tf.maximum(tf.sum(mask), 1)
    return tf.add(loss, tf.div(tf.sum(tf.mul(aux, tf.sum(mask, 1))), denom)) as tf.Scalar
  })
}

/**
 * Σ mask·(−log p(target)) / `denominator`. logits [B, T, V], targets [B, T] int32, mask [B, T] float.
 * The denominator defaults to Σ mask (at least 1, computed where the tensors are); microbatches
 * and replicas pass the global count so their sums add up to the whole batch's mean exactly. One
 * native kernel where those run (kernels/cross-entropy.ts).
 */
export function maskedCrossEntropy(
  logits: tf.Tensor,
  targets: tf.Tensor,
  mask: tf.Tensor,
  denominator?: number,
): tf.Scalar {
  return tf.tidy(() => {
    const fused = fusedCrossEntropy(logits, targets, mask, denominator)
    if (fused) return fused
    const V = logits.shape[logits.rank - 1]!
    const flat = tf.reshape(logits, [-1, V])
    const onehot = tf.oneHot(tf.reshape(targets, [-1]), V)
    // softmaxCrossEntropy has a fused (softmax − onehot) gradient: no gather, no log-softmax backward.
    const nll = tf.losses.softmaxCrossEntropy(onehot, flat, undefined, 0, tf.Reduction.NONE) // [B·T]
    const total = tf.sum(tf.mul(nll, tf.reshape(mask, [-1])))
    // Σ mask stays a tensor: nothing is read back (impossible synchronously on webgpu); the quotient has the same bits
    const denom = denominator ?? tf.maximum(tf.sum(mask), 1)
    return tf.div(total, denom) as tf.Scalar
  })
}
