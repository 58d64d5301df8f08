/**
 * @module Tensor functions for one decode step over many sequences. levanter's own layers take a
 * single position offset for the whole batch; a continuous batch holds sequences at different
 * positions, so positions, rotary tables and attention are per row here.
 */
import * as tf from '@tensorflow/tfjs'

/** x [..., in] · w [in, out] (+ b) as one 2-D matMul. */
export function linear(x: tf.Tensor, w: tf.Tensor, b?: tf.Tensor): tf.Tensor {
  const inDim = x.shape[x.rank - 1]!, outDim = w.shape[1]!
  const y = tf.matMul(tf.reshape(x, [-1, inDim]), w)
  return tf.reshape(b ? tf.add(y, b) : y, [...x.shape.slice(0, -1), outDim])
}

export function layerNorm(x: tf.Tensor, g: tf.Tensor, b: tf.Tensor, eps: number): tf.Tensor {
  const { mean, variance } = tf.moments(x, -1, true)
  return tf.add(tf.mul(tf.mul(tf.sub(x, mean), tf.rsqrt(tf.add(variance, eps))), g), b)
}

export function rmsNorm(x: tf.Tensor, g: tf.Tensor, eps: number): tf.Tensor {
  return tf.mul(tf.mul(x, tf.rsqrt(tf.add(tf.mean(tf.square(x), -1, true), eps))), g)
}

export function geluTanh(x: tf.Tensor): tf.Tensor {
  const inner = tf.mul(tf.add(x, tf.mul(tf.mul(tf.square(x), x), 0.044715)), Math.sqrt(2 / Math.PI))
  return tf.mul(tf.mul(x, 0.5), tf.add(tf.tanh(inner), 1))
}

/** [B, T, H·K] → [B, H, T, K]. */
export function splitHeads(x: tf.Tensor, nHeads: number): tf.Tensor {
  const [B, T, D] = x.shape as [number, number, number]
  return tf.transpose(tf.reshape(x, [B, T, nHeads, D / nHeads]), [0, 2, 1, 3])
}

/** [B, H, T, K] → [B, T, H·K]. */
export function mergeHeads(x: tf.Tensor): tf.Tensor {
  const [B, H, T, K] = x.shape as [number, number, number, number]
  return tf.reshape(tf.transpose(x, [0, 2, 1, 3]), [B, T, H * K])
}

/** Rotary cos/sin [B, 1, T, K] for each row's absolute positions [B][T] (half-split layout). */
export function ropeRows(positions: readonly (readonly number[])[], K: number, theta: number): { cos: tf.Tensor; sin: tf.Tensor } {
  const B = positions.length, T = positions[0]!.length, half = K / 2
  const cos = new Float32Array(B * T * K), sin = new Float32Array(B * T * K)
  positions.forEach((row, r) => row.forEach((p, t) => {
    const o = (r * T + t) * K
    for (let i = 0; i < half; i++) {
      const a = p / Math.pow(theta, (2 * i) / K)
      cos[o + i] = cos[o + i + half] = Math.cos(a)
      sin[o + i] = sin[o + i + half] = Math.sin(a)
    }
  }))
  return { cos: tf.tensor4d(cos, [B, 1, T, K]), sin: tf.tensor4d(sin, [B, 1, T, K]) }
}

export function applyRope(x: tf.Tensor, cos: tf.Tensor, sin: tf.Tensor): tf.Tensor {
  const K = x.shape[3]!
  const [x1, x2] = tf.split(x, [K / 2, K / 2], 3) as [tf.Tensor, tf.Tensor]
  return tf.add(tf.mul(x, cos), tf.mul(tf.concat([tf.neg(x2), x1], 3), sin))
}

/**
 * Attention over the batch: q [B, H, T, K], keys/values [B, H, S, K], bias [B, 1, T, S] (-1e9 where a
 * query may not look: the future, and each row's padding) → [B, H, T, K], as one batched product.
 */
export function maskedAttention(q: tf.Tensor, k: tf.Tensor, v: tf.Tensor, bias: tf.Tensor): tf.Tensor {
  const [B, H, T, K] = q.shape as [number, number, number, number]
  const S = k.shape[2]!
  const kT = tf.transpose(tf.reshape(k, [B * H, S, K]), [0, 2, 1]) // [B·H, K, S]
  const scores = tf.add(tf.reshape(tf.mul(tf.matMul(tf.reshape(q, [B * H, T, K]), kT), 1 / Math.sqrt(K)), [B, H, T, S]), bias)
  const p = tf.reshape(tf.softmax(scores), [B * H, T, S])
  return tf.reshape(tf.matMul(p, tf.reshape(v, [B * H, S, K])), [B, H, T, K])
}
