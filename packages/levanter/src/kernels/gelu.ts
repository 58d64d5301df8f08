/**
 * @module GELU (GPT-2's tanh approximation) with its own gradient. Two things make it fast:
 * ½(1 + tanh(u)) = σ(2u), so the forward pass is x·σ(2u) — the wasm backend runs Sigmoid
 * vectorized (XNNPACK) but Tanh as a scalar loop, ~20× slower here — and the backward pass is one
 * closed-form expression instead of autodiff through eight elementwise ops; on wasm that
 * expression is one loop over the heap (≈3 ms for [16, 128, 1024] against ≈16 ms as kernels).
 */
import * as tf from '@tensorflow/tfjs'
import { heapKernel } from './wasm-heap.js'

const C = Math.sqrt(2 / Math.PI),
  A = 0.044715

type Save = (s: tf.Tensor[]) => void

const core = tf.customGrad((...args: (tf.Tensor | Save)[]) => {
  const x = args[0] as tf.Tensor
  const save = args[1] as Save
  const x2 = tf.square(x)
  // σ(2u), u = C(x + A·x³); x·x² (Pow is slow on wasm)
  const s = tf.sigmoid(tf.mul(tf.add(x, tf.mul(tf.mul(x2, x), A)), 2 * C))
  save([x, s])
  return {
    value: tf.mul(x, s),
    gradFunc: (dy: tf.Tensor | tf.Tensor[], saved: tf.Tensor[]) => {
      const [xs, ss] = saved as [tf.Tensor, tf.Tensor]
      // d/dx x·σ(2u) = σ + x·σ(1−σ)·2u' = σ·(1 + x(1−σ)·(2C + 6AC·x²))
      // on wasm one loop over the heap, eight elementwise kernels otherwise
      const fused = heapKernel(xs.shape, [dy as tf.Tensor, xs, ss], geluGradLoop)
      if (fused) return [fused]
      const du = tf.add(tf.mul(tf.square(xs), 6 * A * C), 2 * C)
      const grad = tf.mul(ss, tf.add(tf.mul(tf.mul(xs, tf.sub(1, ss)), du), 1))
      return [tf.mul(dy as tf.Tensor, grad)]
    },
  }
})

function geluGradLoop(out: Float32Array, dy: Float32Array, x: Float32Array, s: Float32Array): void {
  const k1 = 6 * A * C,
    k2 = 2 * C
  for (let i = 0; i < out.length; i++) {
    const xi = x[i]!,
      si = s[i]!
    out[i] = dy[i]! * si * (1 + xi * (1 - si) * (k1 * xi * xi + k2))
  }
}

/** GELU with the tanh approximation: ½x(1 + tanh(√(2/π)(x + 0.044715x³))). */
export function fusedGeluTanh(x: tf.Tensor): tf.Tensor {
  return core(x) as tf.Tensor
}
