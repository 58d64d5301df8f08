/** @module Next-token cross-entropy with a loss mask (padding, document boundaries). */
import * as tf from '@tensorflow/tfjs'
import { fusedCrossEntropy } from './kernels/cross-entropy.js'

/**
 * Σ mask·(−log p(target)) / `denominator`. logits [B, T, V], targets [B, T] int32, mask [B, T] float.
 * The denominator defaults to Σ mask; microbatches and replicas pass the global count so their
 * sums add up to the whole batch's mean exactly. One native kernel where those run
 * (kernels/cross-entropy.ts).
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
    const denom = denominator ?? Math.max(1, tf.sum(mask).dataSync()[0]!)
    return tf.div(total, denom) as tf.Scalar
  })
}
