/**
 * @module Llama: RMSNorm, rotary positions (optionally scaled), SwiGLU, grouped-query attention
 * (`nKvHeads` key/value heads shared by nHeads/nKvHeads query heads each; the KV cache keeps only
 * those), untied or tied head. Names are LlamaForCausalLM's; linear weights are stored [in, out]
 * here (Hugging Face stores [out, in]; export transposes).
 */
import * as tf from '@tensorflow/tfjs'
import { fusedDecodeAttention } from '../kernels/attention.js'
import { llamaHidden, llamaKvHeads } from './config.js'
import type { LlamaConfig } from './config.js'
import type { LayerKv } from './batch-cache.js'
import {
  applyRope,
  attention,
  decodeStepOver,
  lastPosition,
  linear,
  mergeHeads,
  rmsNorm,
  ropeTables,
  splitHeads,
  tiedHead,
} from './layers.js'
import type { ForwardArgs, ForwardResult } from './layers.js'
import { mat, ones } from './param-spec.js'
import type { ParamSpec } from './param-spec.js'

export function llamaSpecs(c: LlamaConfig): ParamSpec[] {
  const D = c.dModel,
    F = llamaHidden(c),
    KV = (c.dModel / c.nHeads) * llamaKvHeads(c),
    s = c.initStd,
    proj = s / Math.sqrt(2 * c.nLayers)
  const specs: ParamSpec[] = [mat('model.embed_tokens.weight', [c.vocabSize, D], s)]
  for (let i = 0; i < c.nLayers; i++) {
    const l = `model.layers.${i}`
    specs.push(
      ones(`${l}.input_layernorm.weight`, D),
      mat(`${l}.self_attn.q_proj.weight`, [D, D], s),
      mat(`${l}.self_attn.k_proj.weight`, [D, KV], s),
      mat(`${l}.self_attn.v_proj.weight`, [D, KV], s),
      mat(`${l}.self_attn.o_proj.weight`, [D, D], proj),
      ones(`${l}.post_attention_layernorm.weight`, D),
      mat(`${l}.mlp.gate_proj.weight`, [D, F], s),
      mat(`${l}.mlp.up_proj.weight`, [D, F], s),
      mat(`${l}.mlp.down_proj.weight`, [F, D], proj),
    )
  }
  specs.push(ones('model.norm.weight', D))
  if (!c.tieWordEmbeddings) specs.push(mat('lm_head.weight', [D, c.vocabSize], s))
  return specs
}

/** The K/2 rotary inverse frequencies θ^(-2i/K), scaled as `c.ropeScaling` says (Hugging Face's formulas). */
export function ropeInvFreq(c: LlamaConfig): number[] {
  const K = c.dModel / c.nHeads
  const base = Array.from({ length: K / 2 }, (_, i) => 1 / c.ropeTheta ** ((2 * i) / K))
  const r = c.ropeScaling
  if (!r) return base
  if (r.type === 'linear') return base.map((f) => f / r.factor)
  const lowWavelen = r.originalMaxPositionEmbeddings / r.lowFreqFactor,
    highWavelen = r.originalMaxPositionEmbeddings / r.highFreqFactor
  return base.map((f) => {
    const wavelen = (2 * Math.PI) / f
    if (wavelen < highWavelen) return f
    if (wavelen > lowWavelen) return f / r.factor
    const smooth = (r.originalMaxPositionEmbeddings / wavelen - r.lowFreqFactor) / (r.highFreqFactor - r.lowFreqFactor)
    return ((1 - smooth) * f) / r.factor + smooth * f
  })
}

/** Key/value heads [B, Hkv, S, K] repeated for the query heads that share them: [B, Hkv·g, S, K], head h reading kv
 * head ⌊h/g⌋. */
export function repeatKv(x: tf.Tensor, g: number): tf.Tensor {
  if (g === 1) return x
  const [B, H, S, K] = x.shape as [number, number, number, number]
  // a rank-3 tile: tfjs has its gradient
  return tf.reshape(tf.tile(tf.reshape(x, [B * H, 1, S * K]), [1, g, 1]), [B, H * g, S, K])
}

/** ids [B, T] placed by `at` → logits and each layer's keys/values (see {@link ForwardArgs}). */
export function llamaForward(c: LlamaConfig, ...[p, ids, at, past, lastOnly = false]: ForwardArgs): ForwardResult {
  const [B, T] = ids.shape as [number, number]
  const K = c.dModel / c.nHeads,
    Hkv = llamaKvHeads(c),
    groups = c.nHeads / Hkv
  const { cos, sin } = ropeTables(at, B, T, K, c.ropeScaling ? ropeInvFreq(c) : c.ropeTheta) // [T, K] or [B, 1, T, K]
  let x = tf.reshape(tf.gather(p('model.embed_tokens.weight'), tf.reshape(ids, [-1])), [B, T, c.dModel])
  const kv: LayerKv[] = []
  for (let i = 0; i < c.nLayers; i++) {
    const w = (n: string) => p(`model.layers.${i}.${n}.weight`)
    const a = rmsNorm(x, w('input_layernorm'), c.rmsNormEps)
    const q = applyRope(splitHeads(linear(a, w('self_attn.q_proj')), c.nHeads), cos, sin)
    const k = applyRope(splitHeads(linear(a, w('self_attn.k_proj')), Hkv), cos, sin)
    const v = splitHeads(linear(a, w('self_attn.v_proj')), Hkv)
    const prev = past?.[i]
    // a decode step over a cache: one kernel (grouped heads read in place) where the native ones run; with T = 1,
    // [B, H, 1, K] is already laid out as [B, 1, H·K]
    const flat = (t: tf.Tensor) => tf.reshape(t, [B, 1, -1])
    const cached = prev && decodeStepOver(at, T)
    const step =
      cached && prev
        ? fusedDecodeAttention(flat(q), flat(k), flat(v), prev, cached, { nHeads: c.nHeads, nKvHeads: Hkv })
        : undefined
    let merged: tf.Tensor
    if (step) {
      kv.push({ k: step.k, v: step.v })
      merged = step.out
    } else {
      const kAll = prev ? tf.concat([prev.k, k], 2) : k,
        vAll = prev ? tf.concat([prev.v, v], 2) : v
      kv.push({ k: kAll, v: vAll })
      merged = mergeHeads(attention(q, repeatKv(kAll, groups), repeatKv(vAll, groups), at))
    }
    x = tf.add(x, linear(merged, w('self_attn.o_proj')))
    const m = rmsNorm(x, w('post_attention_layernorm'), c.rmsNormEps)
    const gate = linear(m, w('mlp.gate_proj'))
    const gated = tf.mul(tf.mul(gate, tf.sigmoid(gate)), linear(m, w('mlp.up_proj'))) // silu(gate)·up
    x = tf.add(x, linear(gated, w('mlp.down_proj')))
  }
  x = rmsNorm(lastOnly ? lastPosition(x) : x, p('model.norm.weight'), c.rmsNormEps)
  const logits = c.tieWordEmbeddings ? tiedHead(x, p('model.embed_tokens.weight')) : linear(x, p('lm_head.weight'))
  return { logits, kv }
}
