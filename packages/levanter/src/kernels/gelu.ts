/**
 * @module GELU (GPT-2's tanh approximation) with its own gradient. Where levanter's native kernels
 * run (kernels/native-ops.ts) the forward and backward passes are each one pass over memory, and
 * only x is kept for the backward pass (the gate is recomputed). Otherwise two things make it fast:
 * ½(1 + tanh(u)) = σ(2u), so the forward pass is x·σ(2u) — the wasm backend runs Sigmoid
 * vectorized (XNNPACK) but Tanh as a scalar loop, ~20× slower here — and the backward pass is one
 * closed-form expression instead of autodiff through eight elementwise ops; on wasm that
 * expression is one loop over the heap (≈3 ms for [16, 128, 1024] against ≈16 ms as kernels).
 */
import * as tf from '@tensorflow/tfjs'
import { nativeKernels } from './native-ops.js'
import { heapKernel } from './wasm-heap.js'

const C = Math.sqrt(2 / Math.PI),
  A = 0.044715

type Save = (s: tf.Tensor[]) => void

const core = tf.customGrad((...args: (tf.Tensor | Save)[]) => {
  const x = args[0] as tf.Tensor
  const save = args[1] as Save
  const native = nativeKernels()
  const y = native && heapKernel(x.shape, [x], (out, xv) => native.geluForward(xv!, out))
  if (native && y) {
    save([x])
    return {
      value: y,
      gradFunc: (dy: tf.Tensor | tf.Tensor[], saved: tf.Tensor[]) => {
        const d = dy as tf.Tensor,
          xs = saved[0]!
        const dx = heapKernel(d.shape, [xs, d], (out, xv, dv) => native.geluBackward(xv!, dv!, out))
        return [dx ?? tf.mul(d, geluGrad(xs, geluGate(xs)))]
      },
    }
  }
  const s = geluGate(x)
  save([x, s])
  return {
    value: tf.mul(x, s),
    gradFunc: (dy: tf.Tensor | tf.Tensor[], saved: tf.Tensor[]) => {
      const [xs, ss] = saved as [tf.Tensor, tf.Tensor]
      // on wasm one loop over the heap, eight elementwise kernels otherwise
      const fused = heapKernel(xs.shape, [dy as tf.Tensor, xs, ss], geluGradLoop)
      return [fused ?? tf.mul(dy as tf.Tensor, geluGrad(xs, ss))]
    },
  }
})

/** σ(2u), u = C(x + A·x³): ½(1 + tanh(u)) as a sigmoid (x·x², Pow is slow on wasm). */
function geluGate(x: tf.Tensor): tf.Tensor {
  return tf.sigmoid(tf.mul(tf.add(x, tf.mul(tf.mul(tf.square(x), x), A)), 2 * C))
}

/** d/dx x·σ(2u) = σ + x·σ(1−σ)·2u' = σ·(1 + x(1−σ)·(2C + 6AC·x²)), as tensor ops. */
function geluGrad(x: tf.Tensor, s: tf.Tensor): tf.Tensor {
  const du = tf.add(tf.mul(tf.square(x), 6 * A * C), 2 * C)
  return tf.mul(s, tf.add(tf.mul(tf.mul(x, tf.sub(1, s)), du), 1))
}

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
