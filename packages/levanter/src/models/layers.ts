/** @module Transformer building blocks as plain tensor functions. Shapes: B batch, T query positions, S key positions,
 * H heads, K head size. */
import * as tf from '@tensorflow/tfjs'
import type { LayerKv } from './batch-cache.js'
import { columnSum } from '../kernels/column-sum.js'
import { fusedGeluTanh } from '../kernels/gelu.js'
import { fusedLayerNorm } from '../kernels/layer-norm.js'
import { fusedBiasSoftmax, fusedCausalSoftmax } from '../kernels/softmax.js'
import { nativeKernels } from '../kernels/native-ops.js'
import { matMulT } from '../kernels/transpose-last.js'
import { heapKernel } from '../kernels/wasm-heap.js'
import { transposeIsFree } from '../kernels/wasm-gemm.js'

/**
 * dW = xᵀ · dy for x [N, in], dy [N, out]: one flagged product where transposes are free.
 * Otherwise (XNNPACK packs a product's right operand on every call) the narrower of x and dy goes
 * on the right: for out > in, (dyᵀ · x)ᵀ (measured for N 2048, in 256: 44 ms instead of 58 at
 * out 1024, 34 instead of 37 at 768).
 */
function weightGrad(x: tf.Tensor, dy: tf.Tensor): tf.Tensor {
  if (transposeIsFree()) return tf.matMul(x, dy, true, false)
  return dy.shape[1]! > x.shape[1]! ? tf.transpose(tf.matMul(tf.transpose(dy), x)) : tf.matMul(tf.transpose(x), dy)
}

/**
 * x2 [N, in] · w [in, out] + b [out], with a gradient on 2-D matMuls (transposed operands read in
 * place where the backend can, kernels/wasm-gemm.ts) and the bias gradient as one pass over dy's rows
 * (kernels/column-sum.ts). With the native kernels the bias is the GEMM's starting value.
 */
const affine = tf.customGrad((...args: (tf.Tensor | ((s: tf.Tensor[]) => void))[]) => {
  const [x2, w, b] = args as [tf.Tensor, tf.Tensor, tf.Tensor]
  const save = args[3] as (s: tf.Tensor[]) => void
  save([x2, w])
  const native = nativeKernels()
  const fused =
    native &&
    heapKernel([x2.shape[0]!, w.shape[1]!], [x2, w, b], (y, xv, wv, bv) => native.affineForward(xv!, wv!, bv!, y))
  return {
    value: fused ?? tf.add(tf.matMul(x2, w), b),
    gradFunc: (dy: tf.Tensor | tf.Tensor[], saved: tf.Tensor[]) => {
      const g = dy as tf.Tensor
      const [xs, ws] = saved as [tf.Tensor, tf.Tensor]
      return [matMulT(g, ws, false, true), weightGrad(xs, g), columnSum(g)]
    },
  }
})

/** x [..., in] · w [in, out] (+ b [out]) as one 2-D matMul: [..., out]. */
export function linear(x: tf.Tensor, w: tf.Tensor, b?: tf.Tensor): tf.Tensor {
  const inDim = x.shape[x.rank - 1]!,
    outDim = w.shape[1]!
  const x2 = tf.reshape(x, [-1, inDim])
  const y = b ? (affine(x2, w, b) as tf.Tensor) : tf.matMul(x2, w)
  return tf.reshape(y, [...x.shape.slice(0, -1), outDim])
}

/**
 * Logits of a head tied to the embedding: x [..., D] · embᵀ for emb [V, D] → [..., V], the embedding read transposed
 * in place where the backend can (`matMulT`). Transposing it first copied all V·D weights on every forward pass:
 * at GPT-2's vocabulary (50,257 × 768) that copy was most of a decode step (about 200 of 235 ms).
 */
export function tiedHead(x: tf.Tensor, emb: tf.Tensor): tf.Tensor {
  const D = x.shape[x.rank - 1]!
  const y = matMulT(tf.reshape(x, [-1, D]), emb, false, true)
  return tf.reshape(y, [...x.shape.slice(0, -1), emb.shape[0]!])
}

/** LayerNorm over the last axis (closed-form gradient: kernels/layer-norm.ts). */
export function layerNorm(x: tf.Tensor, g: tf.Tensor, b: tf.Tensor, eps: number): tf.Tensor {
  return fusedLayerNorm(x, g, b, eps)
}

/** RMSNorm over the last axis. */
export function rmsNorm(x: tf.Tensor, g: tf.Tensor, eps: number): tf.Tensor {
  return tf.mul(tf.mul(x, tf.rsqrt(tf.add(tf.mean(tf.square(x), -1, true), eps))), g)
}

/** GELU with GPT-2's tanh approximation: ½x(1 + tanh(√(2/π)(x + 0.044715x³))) (closed-form gradient: kernels/gelu.ts).
 * */
export function geluTanh(x: tf.Tensor): tf.Tensor {
  return fusedGeluTanh(x)
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

/**
 * Where the rows of a forward pass sit. `{ offset }`: every row at positions offset…offset+T-1,
 * attending causally (training, scoring). `{ positions, bias }`: row r's query t at absolute
 * position positions[r][t], attending where the additive mask `bias` [B, 1, T, S] is 0 (-1e9
 * elsewhere): a batch whose rows sit at different positions, with padding (batched decoding); `cached` says the
 * mask is a right-aligned cache's.
 */
export type Placement =
  | { readonly offset: number }
  | {
      readonly positions: readonly (readonly number[])[]
      readonly bias: tf.Tensor
      /** Set when `bias` masks exactly this: row r sees the last cached[r] columns of the past keys (right-aligned,
       * as `BatchCache` keeps them) and the pass's own up to its query. A decode step's attention then runs as one
       * kernel over the valid columns (kernels/attention.ts) where the native kernels do. */
      readonly cached?: readonly number[]
    }

/** The rows' cached lengths when a pass of T positions is one decode step over a cache that `at` describes exactly
 * (what a decode-attention kernel needs); undefined otherwise. */
export function decodeStepOver(at: Placement, T: number): readonly number[] | undefined {
  return T === 1 && 'cached' in at ? at.cached : undefined
}

/**
 * What a model's forward pass takes besides its config: its parameters by name, ids [B, T],
 * their placement, each layer's keys/values so far, and whether only the last position's
 * logits are wanted.
 */
export type ForwardArgs = [
  p: (name: string) => tf.Tensor,
  ids: tf.Tensor,
  at: Placement,
  past?: readonly LayerKv[],
  lastOnly?: boolean,
  /** false: the caller drops the keys/values (training, scoring), so attention may run fused without them */
  keepKv?: boolean,
]

/** logits [B, T, V] ([B, 1, V] with `lastOnly`) and each layer's keys/values, `past` included (none when `keepKv` is
 * false). */
/** `aux`: an auxiliary training loss per row [B] (e.g. a router's load-balancing loss), added by loss.ts
 * `withAuxLoss`; absent for most architectures. */
export type ForwardResult = { logits: tf.Tensor; kv: LayerKv[]; aux?: tf.Tensor }

/** Additive causal mask [T, S]: query t (absolute position offset+t) sees keys 0…offset+t. */
export function causalBias(T: number, S: number, offset: number): tf.Tensor {
  const m = new Float32Array(T * S)
  for (let t = 0; t < T; t++) for (let s = offset + t + 1; s < S; s++) m[t * S + s] = -1e9
  return tf.tensor2d(m, [T, S])
}

/**
 * Attention. q [B, H, T, K], k and v [B, H, S, K] (S ≥ T; the last T keys are the queries' own
 * positions) → [B, H, T, K], masked causally (`{ offset }`) or by the placement's bias. Multiplies
 * are rank-3; kᵀ is read in place where the backend can, and the causal softmax is one native
 * kernel where those run (kernels/).
 */
export function attention(q: tf.Tensor, k: tf.Tensor, v: tf.Tensor, at: Placement): tf.Tensor {
  const [B, H, T, K] = q.shape as [number, number, number, number]
  const S = k.shape[2]!
  const q3 = tf.reshape(q, [B * H, T, K]),
    k3 = tf.reshape(k, [B * H, S, K]),
    v3 = tf.reshape(v, [B * H, S, K])
  const qk = matMulT(q3, k3, false, true) // [B·H, T, S]
  const fused =
    'offset' in at
      ? fusedCausalSoftmax(qk, 1 / Math.sqrt(K), at.offset)
      : fusedBiasSoftmax(qk, 1 / Math.sqrt(K), at.bias)
  const out = tf.matMul(fused ?? tf.softmax(maskedScores(qk, 1 / Math.sqrt(K), at)), v3) // [B·H, T, K]
  return tf.reshape(out, [B, H, T, K])
}

/** scale·qk plus the placement's additive mask, qk [B·H, T, S]. */
function maskedScores(qk: tf.Tensor, scale: number, at: Placement): tf.Tensor {
  const [BH, T, S] = qk.shape as [number, number, number]
  const raw = tf.mul(qk, scale)
  if ('offset' in at) return tf.add(raw, causalBias(T, S, at.offset))
  const B = at.bias.shape[0]!
  return tf.reshape(tf.add(tf.reshape(raw, [B, BH / B, T, S]), at.bias), [BH, T, S])
}

/** Absolute positions of each row's queries, [B][T]. */
export function positionsOf(at: Placement, B: number, T: number): (readonly number[])[] {
  if (!('offset' in at)) return [...at.positions]
  const row = Array.from({ length: T }, (_, t) => at.offset + t)
  return Array.from({ length: B }, () => row)
}

/**
 * Rotary tables cos/sin for the placement (half-split layout, as Hugging Face Llama): [T, K] for
 * `{ offset }`, [B, 1, T, K] for per-row positions. `theta` is the base, or the K/2 inverse
 * frequencies themselves (scaled rotary, models/llama.ts).
 */
export function ropeTables(
  at: Placement,
  B: number,
  T: number,
  K: number,
  theta: number | readonly number[],
): { cos: tf.Tensor; sin: tf.Tensor } {
  const rows = 'offset' in at ? [positionsOf(at, 1, T)[0]!] : at.positions
  const cos = new Float32Array(rows.length * T * K),
    sin = new Float32Array(rows.length * T * K),
    half = K / 2
  rows.forEach((row, r) =>
    row.forEach((p, t) => {
      const o = (r * T + t) * K
      for (let i = 0; i < half; i++) {
        const a = typeof theta === 'number' ? p / theta ** ((2 * i) / K) : p * theta[i]!
        cos[o + i] = cos[o + i + half] = Math.cos(a)
        sin[o + i] = sin[o + i + half] = Math.sin(a)
      }
    }),
  )
  if ('offset' in at) return { cos: tf.tensor2d(cos, [T, K]), sin: tf.tensor2d(sin, [T, K]) }
  return { cos: tf.tensor4d(cos, [B, 1, T, K]), sin: tf.tensor4d(sin, [B, 1, T, K]) }
}

/** x·cos + rotate_half(x)·sin for x [B, H, T, K]. */
export function applyRope(x: tf.Tensor, cos: tf.Tensor, sin: tf.Tensor): tf.Tensor {
  const K = x.shape[3]!
  const [x1, x2] = tf.split(x, [K / 2, K / 2], 3) as [tf.Tensor, tf.Tensor]
  const rotated = tf.concat([tf.neg(x2), x1], 3)
  return tf.add(tf.mul(x, cos), tf.mul(rotated, sin))
}

/** Keeps only the last position of x [B, T, D] (logits of the last position are all sampling needs). */
export function lastPosition(x: tf.Tensor): tf.Tensor {
  const [B, T, D] = x.shape as [number, number, number]
  return T > 1 ? tf.slice(x, [0, T - 1, 0], [B, 1, D]) : x
}
