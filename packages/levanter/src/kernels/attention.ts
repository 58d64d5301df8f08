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

/**
 * One decode step's attention (one new position per row) in one native call, with the KV cache grown by that
 * position: q [B, 1, H·K] (or the fused projection [B, 1, 3·H·K] with k and v beside it: pass the same tensor as
 * `q`, `k` and `v` with `kvOffset`), past keys/values [B, Hkv, S, K] right-aligned, row b's valid cached columns its
 * last `cached[b]` → the heads merged [B, 1, H·K] and the grown keys/values [B, Hkv, S+1, K] (what a concat gives).
 * Replaces the split, the head transposes, the two concats, both batched products, the bias softmax and the merge
 * transpose of a step (a dozen tensor ops per layer, and their per-op cost, at any batch). The scores and values are
 * summed in another order than the batched products', so logits agree within float32 rounding, not bit for bit.
 * Undefined where the native kernels do not run (other backends; an addon built before this kernel).
 */
let decodeKernelOn = true

/** Turns {@link fusedDecodeAttention} off (decode steps then run on tensor ops) or back on; answers the setting
 * before. For comparisons: tests and `pnpm bench serve` measure a step both ways. */
export function useDecodeKernel(on: boolean): boolean {
  const was = decodeKernelOn
  decodeKernelOn = on
  return was
}

export function fusedDecodeAttention(
  q: tf.Tensor,
  k: tf.Tensor,
  v: tf.Tensor,
  past: { readonly k: tf.Tensor; readonly v: tf.Tensor },
  cached: readonly number[],
  o: { readonly nHeads: number; readonly nKvHeads: number; readonly kvOffset?: readonly [number, number] },
): { out: tf.Tensor; k: tf.Tensor; v: tf.Tensor } | undefined {
  const native = decodeKernelOn ? nativeKernels() : undefined
  const decode = native?.decodeAttention
  if (!decode || q.rank !== 3 || q.shape[1] !== 1) return undefined
  const [B, Hkv, S, K] = past.k.shape as [number, number, number, number]
  const H = o.nHeads,
    qStride = q.shape[2]!,
    kvStride = k.shape[2]!
  const [kOff, vOff] = o.kvOffset ?? [0, 0]
  if (cached.length !== B || Hkv !== o.nKvHeads || q.shape[0] !== B || qStride < H * K) return undefined
  const lengths = Int32Array.from(cached)
  const outs = heapKernels(
    [
      [B, 1, H * K],
      [B, Hkv, S + 1, K],
      [B, Hkv, S + 1, K],
    ],
    [q, k, v, past.k, past.v],
    ([out, ok, ov], [qv, kv, vv, pk, pv]) =>
      decode.call(
        native,
        qv!,
        kv!.subarray(kOff),
        vv!.subarray(vOff),
        pk!,
        pv!,
        lengths,
        ok!,
        ov!,
        out!,
        H,
        Hkv,
        K,
        qStride,
        kvStride,
        1 / Math.sqrt(K),
      ),
  )
  if (!outs) return undefined
  const [out, kAll, vAll] = outs as [tf.Tensor, tf.Tensor, tf.Tensor]
  return { out, k: kAll, v: vAll }
}
