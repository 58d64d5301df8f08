/**
 * @module Causal self-attention as one native kernel each way (kernels/native-ops.ts), straight from
 * the fused q/k/v projection [B, T, 3D] to the merged heads [B, T, D]: per (batch, head) the scores
 * Q·Kᵀ, the scaled causal softmax and P·V run on the native GEMM reading each head's strided columns
 * in place. tfjs needs a split, three head transposes, two batched products, the mask, the softmax
 * and a merge transpose forward, and their gradients backward. Only the probabilities P
 * [B, H, T, T] and the projection are kept for the backward pass.
 */
import * as tf from '@tensorflow/tfjs'
import { nativeKernels } from './native-ops.js'
import { heapFloats, heapKernel, heapKernels } from './wasm-heap.js'

type Save = (s: tf.Tensor[]) => void

/**
 * Attention of qkv [B, T, 3D] (q, k and v side by side, `nHeads` heads each) over positions 0…T-1,
 * causally, heads merged: [B, T, D]; undefined where the native kernels do not run.
 */
export function fusedCausalAttention(qkv: tf.Tensor, nHeads: number): tf.Tensor | undefined {
  const native = nativeKernels()
  if (!native || qkv.dtype !== 'float32' || qkv.rank !== 3 || !heapFloats(qkv, tf.backend())) return undefined
  const [B, T, D3] = qkv.shape as [number, number, number]
  const D = D3 / 3,
    K = D / nHeads,
    scale = 1 / Math.sqrt(K)
  const f = tf.customGrad((...args: (tf.Tensor | Save)[]) => {
    const [x, save] = args as [tf.Tensor, Save]
    const [out, probs] = heapKernels(
      [
        [B, T, D],
        [B, nHeads, T, T],
      ],
      [x],
      ([o, p], [xv]) => native.attentionForward(xv!, o!, p!, B, T, nHeads, K, scale),
    ) as [tf.Tensor, tf.Tensor]
    save([x, probs])
    return {
      value: out,
      gradFunc: (dy: tf.Tensor | tf.Tensor[], saved: tf.Tensor[]) => {
        const [xs, p] = saved as [tf.Tensor, tf.Tensor]
        const dx = heapKernel([B, T, D3], [xs, p, dy as tf.Tensor], (o, xv, pv, dv) =>
          native.attentionBackward(xv!, pv!, dv!, o, B, T, nHeads, K, scale),
        )!
        return [dx]
      },
    }
  })
  return f(qkv) as tf.Tensor
}
