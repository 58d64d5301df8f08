/**
 * @module Attention's scaled, masked softmax as one native kernel each way (kernels/native-ops.ts):
 * softmax(scale·x + mask) over the last axis of x [B·H, T, S], the mask causal or an additive bias,
 * and dx = scale·y·(dy − Σ dy·y). tfjs runs five kernels forward (scale, mask add, max, exp, sum,
 * ...) and as many backward. Both masks give a row the same bits, so cached decoding (bias) equals
 * the full forward (causal).
 */
import * as tf from '@tensorflow/tfjs'
import { nativeKernels } from './native-ops.js'
import type { NativeOps } from './native-addon.js'
import { heapFloats, heapKernel } from './wasm-heap.js'
import { deviceBiasSoftmax, deviceCausalSoftmax } from '../webgpu/kernels/softmax.js'

type Save = (s: tf.Tensor[]) => void

/**
 * softmax(scale·x) over rows of x [..., T, S] where query t (absolute position offset + t) sees keys
 * 0…offset+t (probability 0 beyond), with its gradient; undefined where neither the native kernels
 * nor the WGSL ones (webgpu/kernels/softmax.ts) run, for the caller to compose it from tensor ops.
 */
export function fusedCausalSoftmax(x: tf.Tensor, scale: number, offset: number): tf.Tensor | undefined {
  const device = deviceCausalSoftmax(x, scale, offset)
  if (device) return device
  const S = x.shape[x.rank - 1]!,
    T = x.shape[x.rank - 2]!
  return fused(x, scale, [], (native, xv, out) => native.softmaxForward(xv, out, S, T, offset, scale, true))
}

/**
 * softmax(scale·x + bias) for x [B·H, T, S] and an additive mask bias [B, 1, T, S] (0 where seen,
 * −1e9 elsewhere), with its gradient; the same bits as {@link fusedCausalSoftmax} gives a row the
 * bias masks the same way. Undefined where neither the native nor the WGSL kernels run.
 */
export function fusedBiasSoftmax(x: tf.Tensor, scale: number, bias: tf.Tensor): tf.Tensor | undefined {
  const device = deviceBiasSoftmax(x, scale, bias)
  if (device) return device
  const S = x.shape[x.rank - 1]!,
    T = x.shape[x.rank - 2]!,
    H = x.shape[0]! / bias.shape[0]!
  if (bias.size * H !== x.size) return undefined
  return fused(x, scale, [bias], (native, xv, out, bv) => native.softmaxBiasForward(xv, bv!, out, S, T, H, scale))
}

function fused(
  x: tf.Tensor,
  scale: number,
  extra: tf.Tensor[],
  forward: (native: NativeOps, x: Float32Array, out: Float32Array, ...extra: Float32Array[]) => void,
): tf.Tensor | undefined {
  const native = nativeKernels()
  if (!native || x.dtype !== 'float32' || ![x, ...extra].every((t) => heapFloats(t, tf.backend()))) return undefined
  const S = x.shape[x.rank - 1]!
  const f = tf.customGrad((...args: (tf.Tensor | Save)[]) => {
    const [raw, save] = args as [tf.Tensor, Save]
    const y = heapKernel(raw.shape, [raw, ...extra], (out, xv, ...ev) => forward(native, xv!, out, ...ev))!
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
