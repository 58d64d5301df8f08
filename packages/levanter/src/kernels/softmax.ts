/**
 * @module Attention's scaled, causally masked softmax as one native kernel each way
 * (kernels/native-ops.ts): softmax(scale·x + causal mask) over the last axis of x [B·H, T, S], and
 * dx = scale·y·(dy − Σ dy·y). tfjs runs five kernels forward (scale, mask add, max, exp, sum, ...)
 * and as many backward.
 */
import * as tf from '@tensorflow/tfjs'
import { nativeKernels } from './native-ops.js'
import { heapFloats, heapKernel } from './wasm-heap.js'

type Save = (s: tf.Tensor[]) => void

/**
 * softmax(scale·x) over rows of x [..., T, S] where query t (absolute position offset + t) sees keys
 * 0…offset+t (probability 0 beyond), with its gradient; undefined where the native kernels do not
 * run, for the caller to compose it from tensor ops.
 */
export function fusedCausalSoftmax(x: tf.Tensor, scale: number, offset: number): tf.Tensor | undefined {
  const native = nativeKernels()
  if (!native || x.dtype !== 'float32' || !heapFloats(x, tf.backend())) return undefined
  const S = x.shape[x.rank - 1]!,
    T = x.shape[x.rank - 2]!
  const f = tf.customGrad((...args: (tf.Tensor | Save)[]) => {
    const [raw, save] = args as [tf.Tensor, Save]
    const y = heapKernel(raw.shape, [raw], (out, xv) => native.softmaxForward(xv!, out, S, T, offset, scale, true))!
    save([y])
    return {
      value: y,
      gradFunc: (dy: tf.Tensor | tf.Tensor[], saved: tf.Tensor[]) => {
        const d = dy as tf.Tensor,
          ys = saved[0]!
        const dx = heapKernel(d.shape, [ys, d], (out, yv, dv) => native.softmaxBackward(yv!, dv!, out, S, scale))
        return [dx ?? tf.mul(tf.mul(ys, tf.sub(d, tf.sum(tf.mul(d, ys), -1, true))), scale)]
      },
    }
  })
  return f(x) as tf.Tensor
}
