/**
 * @module The attention of the Llama family (Llama, Qwen3, Mixtral), once: an RMSNorm, q/k/v projections, rotary
 * positions, grouped-query attention (`nKvHeads` key/value heads shared by nHeads/nKvHeads query heads each; the KV
 * cache keeps only those) and the output projection, with the options that tell the members apart: a head size of
 * its own (`headDim`, so q_proj is dModel × nHeads·headDim), an RMSNorm over each query and key head before rotary
 * (`qkNorm`: Qwen3's `q_norm`/`k_norm`) and rotary θ or scaled inverse frequencies (`rope`). Names are
 * Hugging Face's (`self_attn.*`); linear weights are stored [in, out]. Over the model axis attention splits by
 * heads: q/k/v projections by columns, the output projection by rows; the per-head norms are replicated.
 */
import * as tf from '@tensorflow/tfjs'
import { LevanterError } from '../errors.js'
import { fusedDecodeAttention } from '../kernels/attention.js'
import type { LayerKv } from './batch-cache.js'
import { applyRope, attention, decodeStepOver, linear, mergeHeads, rmsNorm, ropeTables, splitHeads } from './layers.js'
import type { Placement } from './layers.js'
import { mat, ones } from './param-spec.js'
import type { ParamSpec } from './param-spec.js'
import { residual } from './stages.js'
import type { Stage } from './stages.js'

/** The shape and options of a Llama-family attention. */
export type LlamaAttention = {
  readonly dModel: number
  readonly nHeads: number
  readonly nKvHeads: number
  /** Size of each head (dModel / nHeads unless the architecture says otherwise). */
  readonly headDim: number
  readonly rmsNormEps: number
  /** Rotary θ, or the K/2 inverse frequencies (scaled rotary). */
  readonly rope: number | readonly number[]
  /** An RMSNorm over each query and key head before rotary (weights `q_norm`/`k_norm` of size headDim). */
  readonly qkNorm: boolean
}

/** Refuses a config whose heads cannot be grouped or rotated (BAD_CONFIG naming the field; `headField` names the
 * head size as the architecture's config gives it). */
export function checkLlamaAttention(a: LlamaAttention, headField = 'headDim'): void {
  if (a.nHeads % a.nKvHeads !== 0)
    throw new LevanterError(
      'BAD_CONFIG',
      `model: nHeads ${a.nHeads} is not a multiple of nKvHeads ${a.nKvHeads}; ` +
        `each key/value head serves the same number of query heads`,
    )
  // a head size that is not a whole number is CausalLM's to refuse (dModel not a multiple of nHeads)
  if (Number.isInteger(a.headDim) && a.headDim % 2 !== 0)
    throw new LevanterError('BAD_CONFIG', `model: ${headField} ${a.headDim} must be even (rotary pairs)`)
}

const projections = (a: LlamaAttention) => ['q_proj', 'k_proj', 'v_proj', ...(a.qkNorm ? ['q_norm', 'k_norm'] : [])]

/** Layer `l`'s attention weights in the order the stage and {@link attend} take them: the input RMSNorm, q, k, v,
 * the per-head norms (with qkNorm), then o. */
export const attentionNames = (a: LlamaAttention, l: string): string[] => [
  `${l}.input_layernorm.weight`,
  ...[...projections(a), 'o_proj'].map((n) => `${l}.self_attn.${n}.weight`),
]

/** Layer `l`'s attention parameters, in {@link attentionNames}' order (`std`: the init of q/k/v, `proj`: o's). */
export function attentionSpecs(a: LlamaAttention, l: string, std: number, proj: number): ParamSpec[] {
  const D = a.dModel,
    K = a.headDim,
    sa = `${l}.self_attn`
  return [
    ones(`${l}.input_layernorm.weight`, D),
    mat(`${sa}.q_proj.weight`, [D, a.nHeads * K], std, 'column'),
    mat(`${sa}.k_proj.weight`, [D, a.nKvHeads * K], std, 'column'),
    mat(`${sa}.v_proj.weight`, [D, a.nKvHeads * K], std, 'column'),
    ...(a.qkNorm ? [ones(`${sa}.q_norm.weight`, K), ones(`${sa}.k_norm.weight`, K)] : []),
    mat(`${sa}.o_proj.weight`, [a.nHeads * K, D], proj, 'row'),
  ]
}

/** Key/value heads [B, Hkv, S, K] repeated for the query heads that share them: [B, Hkv·g, S, K], head h reading kv
 * head ⌊h/g⌋. */
export function repeatKv(x: tf.Tensor, g: number): tf.Tensor {
  if (g === 1) return x
  const [B, H, S, K] = x.shape as [number, number, number, number]
  // a rank-3 tile: tfjs has its gradient
  return tf.reshape(tf.tile(tf.reshape(x, [B * H, 1, S * K]), [1, g, 1]), [B, H * g, S, K])
}

/** Rotary tables for `at` (see layers.ts `ropeTables`). */
export const llamaRope = (a: LlamaAttention, at: Placement, B: number, T: number) =>
  ropeTables(at, B, T, a.headDim, a.rope as number | number[])

/** normed x [B, T, D] → queries [B, H, T, K] and keys, values [B, Hkv, T, K] (`heads`/`kvHeads`: those this member
 * holds), projected, normed per head with qkNorm, queries and keys rotated. */
function qkv(
  a: LlamaAttention,
  x: tf.Tensor,
  w: readonly tf.Tensor[],
  heads: number,
  kvHeads: number,
  cos: tf.Tensor,
  sin: tf.Tensor,
): [tf.Tensor, tf.Tensor, tf.Tensor] {
  const [wq, wk, wv, gq, gk] = w as [tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor?, tf.Tensor?]
  const norm = (t: tf.Tensor, g?: tf.Tensor) => (a.qkNorm ? rmsNorm(t, g!, a.rmsNormEps) : t)
  const q = applyRope(norm(splitHeads(linear(x, wq), heads), gq), cos, sin)
  const k = applyRope(norm(splitHeads(linear(x, wk), kvHeads), gk), cos, sin)
  return [q, k, splitHeads(linear(x, wv), kvHeads)]
}

/**
 * One layer's attention in the whole model: x [B, T, D] placed by `at` → x plus the attention's output, and the
 * layer's keys/values (`prev`, the cache so far, included). `w` are the weights in {@link attentionNames}' order;
 * `cos`/`sin` from {@link llamaRope}. A decode step over a cache is one kernel (grouped heads read in place) where
 * the native ones run.
 */
export function attend(
  a: LlamaAttention,
  x: tf.Tensor,
  w: readonly tf.Tensor[],
  rope: { cos: tf.Tensor; sin: tf.Tensor },
  at: Placement,
  prev?: LayerKv,
): { x: tf.Tensor; kv: LayerKv } {
  const [B, T] = x.shape as [number, number, number]
  const [g, ...rest] = w
  const wo = rest.at(-1)!
  const [q, k, v] = qkv(a, rmsNorm(x, g!, a.rmsNormEps), rest.slice(0, -1), a.nHeads, a.nKvHeads, rope.cos, rope.sin)
  // with T = 1, [B, H, 1, K] is already laid out as [B, 1, H·K]
  const flat = (t: tf.Tensor) => tf.reshape(t, [B, 1, -1])
  const cached = prev && decodeStepOver(at, T)
  const step =
    cached && prev
      ? fusedDecodeAttention(flat(q), flat(k), flat(v), prev, cached, { nHeads: a.nHeads, nKvHeads: a.nKvHeads })
      : undefined
  let merged: tf.Tensor, kv: LayerKv
  if (step) {
    kv = { k: step.k, v: step.v }
    merged = step.out
  } else {
    const groups = a.nHeads / a.nKvHeads
    const kAll = prev ? tf.concat([prev.k, k], 2) : k,
      vAll = prev ? tf.concat([prev.v, v], 2) : v
    kv = { k: kAll, v: vAll }
    merged = mergeHeads(attention(q, repeatKv(kAll, groups), repeatKv(vAll, groups), at))
  }
  return { x: tf.add(x, linear(merged, wo)), kv }
}

/** Layer `l`'s attention as a split stage for a member of `model` (`lead`: its model coordinate is 0): it computes
 * its nHeads/model query heads over its nKvHeads/model key/value heads. */
export function attentionStage(a: LlamaAttention, l: string, model: number, lead: boolean): Stage {
  const heads = a.nHeads / model,
    kvHeads = a.nKvHeads / model
  return {
    names: attentionNames(a, l),
    split: true,
    fn: (x, [g, ...rest]) => {
      const [B, T] = x.shape as [number, number, number]
      const { cos, sin } = llamaRope(a, { offset: 0 }, B, T)
      const wo = rest.at(-1)!
      const [q, k, v] = qkv(a, rmsNorm(x, g!, a.rmsNormEps), rest.slice(0, -1), heads, kvHeads, cos, sin)
      const out = attention(q, repeatKv(k, heads / kvHeads), repeatKv(v, heads / kvHeads), { offset: 0 })
      return residual(lead, x, linear(mergeHeads(out), wo))
    },
  }
}
