/**
 * @module Sum over the rows of a matrix, [N, D] → [D]: the gradient of a bias or a norm's gain.
 * The wasm backend reduces a leading axis as a transpose plus a reduction, and `ones[1, N] · x`
 * makes XNNPACK pack all of x as a right operand for one row of output (≈2 ms for [2048, 256]);
 * one pass over the heap in place takes a quarter of that (the native kernel, kernels/native-ops.ts,
 * less again). On webgpu a WGSL kernel (webgpu/kernels/column-sum.ts); other backends use `tf.sum`.
 */
import * as tf from '@tensorflow/tfjs'
import { nativeKernels } from './native-ops.js'
import { heapFloats, heapKernel } from './wasm-heap.js'
import { deviceColumnSum } from '../webgpu/kernels/column-sum.js'

export function columnSum(x: tf.Tensor): tf.Tensor {
  const device = deviceColumnSum(x)
  if (device) return device
  const [N, D] = x.shape as [number, number]
  const native = x.rank === 2 ? nativeKernels() : undefined
  const summed = native && heapKernel([D], [x], (out, xv) => native.columnSum(xv!, out))
  if (summed) return summed
  const h = x.rank === 2 ? heapFloats(x, tf.backend()) : undefined
  if (!h) return tf.sum(x, 0)
  // four rows per pass: a quarter of the accumulator traffic; float64 partial sums
  const acc = new Float64Array(D)
  const rows4 = N - (N % 4)
  for (let r = 0; r < rows4; r += 4) {
    const b0 = r * D,
      b1 = b0 + D,
      b2 = b1 + D,
      b3 = b2 + D
    for (let j = 0; j < D; j++) acc[j]! += h[b0 + j]! + h[b1 + j]! + h[b2 + j]! + h[b3 + j]!
  }
  for (let r = rows4; r < N; r++) for (let j = 0, b = r * D; j < D; j++) acc[j]! += h[b + j]!
  return tf.tensor1d(Float32Array.from(acc))
}
