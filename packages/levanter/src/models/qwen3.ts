/**
 * @module The Qwen3 architecture: Llama's block (RMSNorm, rotary positions, SwiGLU, grouped-query attention) with
 * an RMSNorm over each query and key head (weights `q_norm`/`k_norm` of size headDim, applied before rotary), a head
 * size of its own (`headDim`, so q_proj is dModel × nHeads·headDim) and an untied head unless `tieWordEmbeddings`.
 * Names are Qwen3ForCausalLM's; linear weights are stored [in, out] here (Hugging Face stores [out, in]). Over the
 * model axis attention splits by heads and the MLP by columns then rows, as Llama's; the per-head norms are
 * replicated (every head uses the same weights).
 */
import * as tf from '@tensorflow/tfjs'
import { LevanterError } from '../errors.js'
import { fusedDecodeAttention } from '../kernels/attention.js'
import { CausalLM } from './causal-lm.js'
import { Qwen3Config } from './config.js'
import type { Qwen3ConfigInput } from './config.js'
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
import { llamaEnds, repeatKv } from './llama.js'
import { mat, ones } from './param-spec.js'
import type { ParamSpec } from './param-spec.js'
import { defineArchitecture } from './registry.js'
import { residual } from './stages.js'
import type { Stage, Stages } from './stages.js'

const TYPE = 'qwen3'
const CLASS = 'Qwen3ForCausalLM'

/** Size of each attention head. */
export const qwen3HeadDim = (c: Qwen3Config): number => c.headDim ?? c.dModel / c.nHeads
/** Key/value heads. */
export const qwen3KvHeads = (c: Qwen3Config): number => c.nKvHeads ?? c.nHeads
/** SwiGLU hidden size: round(8/3·dModel) up to a multiple of 32 unless given. */
export const qwen3Hidden = (c: Qwen3Config): number => c.intermediateSize ?? Math.ceil((8 * c.dModel) / 3 / 32) * 32

/** Qwen3's parameters, in order, with their sharding rules. */
export function qwen3Specs(c: Qwen3Config): ParamSpec[] {
  const D = c.dModel,
    F = qwen3Hidden(c),
    K = qwen3HeadDim(c),
    Q = c.nHeads * K,
    KV = qwen3KvHeads(c) * K,
    s = c.initStd,
    proj = s / Math.sqrt(2 * c.nLayers)
  const specs: ParamSpec[] = [mat('model.embed_tokens.weight', [c.vocabSize, D], s)]
  for (let i = 0; i < c.nLayers; i++) {
    const l = `model.layers.${i}`
    specs.push(
      ones(`${l}.input_layernorm.weight`, D),
      mat(`${l}.self_attn.q_proj.weight`, [D, Q], s, 'column'),
      mat(`${l}.self_attn.k_proj.weight`, [D, KV], s, 'column'),
      mat(`${l}.self_attn.v_proj.weight`, [D, KV], s, 'column'),
      ones(`${l}.self_attn.q_norm.weight`, K),
      ones(`${l}.self_attn.k_norm.weight`, K),
      mat(`${l}.self_attn.o_proj.weight`, [Q, D], proj, 'row'),
      ones(`${l}.post_attention_layernorm.weight`, D),
      mat(`${l}.mlp.gate_proj.weight`, [D, F], s, 'column'),
      mat(`${l}.mlp.up_proj.weight`, [D, F], s, 'column'),
      mat(`${l}.mlp.down_proj.weight`, [F, D], proj, 'row'),
    )
  }
  specs.push(ones('model.norm.weight', D))
  if (!c.tieWordEmbeddings) specs.push(mat('lm_head.weight', [D, c.vocabSize], s))
  return specs
}

/** x [B, T, D] → queries [B, H, T, K] and keys, values [B, Hkv, T, K]: projected, keys and queries normed per head
 * and rotated (`heads`/`kvHeads`: those this member holds). */
function qkv(
  c: Qwen3Config,
  x: tf.Tensor,
  w: readonly tf.Tensor[],
  heads: number,
  kvHeads: number,
  cos: tf.Tensor,
  sin: tf.Tensor,
): [tf.Tensor, tf.Tensor, tf.Tensor] {
  const [wq, wk, wv, gq, gk] = w as [tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]
  const q = applyRope(rmsNorm(splitHeads(linear(x, wq), heads), gq, c.rmsNormEps), cos, sin)
  const k = applyRope(rmsNorm(splitHeads(linear(x, wk), kvHeads), gk, c.rmsNormEps), cos, sin)
  return [q, k, splitHeads(linear(x, wv), kvHeads)]
}

const swiglu = (m: tf.Tensor, wg: tf.Tensor, wu: tf.Tensor, wd: tf.Tensor): tf.Tensor => {
  const gate = linear(m, wg)
  return linear(tf.mul(tf.mul(gate, tf.sigmoid(gate)), linear(m, wu)), wd) // silu(gate)·up, down
}

/** ids [B, T] placed by `at` → logits and each layer's keys/values (see {@link ForwardArgs}). */
export function qwen3Forward(c: Qwen3Config, ...[p, ids, at, past, lastOnly = false]: ForwardArgs): ForwardResult {
  const [B, T] = ids.shape as [number, number]
  const K = qwen3HeadDim(c),
    Hkv = qwen3KvHeads(c),
    groups = c.nHeads / Hkv
  const { cos, sin } = ropeTables(at, B, T, K, c.ropeTheta)
  let x = tf.reshape(tf.gather(p('model.embed_tokens.weight'), tf.reshape(ids, [-1])), [B, T, c.dModel])
  const kv: LayerKv[] = []
  for (let i = 0; i < c.nLayers; i++) {
    const w = (n: string) => p(`model.layers.${i}.${n}.weight`)
    const a = rmsNorm(x, w('input_layernorm'), c.rmsNormEps)
    const names = ['q_proj', 'k_proj', 'v_proj', 'q_norm', 'k_norm'].map((n) => w(`self_attn.${n}`))
    const [q, k, v] = qkv(c, a, names, c.nHeads, Hkv, cos, sin)
    const prev = past?.[i]
    // a decode step over a cache: one kernel where the native ones run ([B, H, 1, K] is laid out as [B, 1, H·K])
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
    x = tf.add(x, swiglu(m, w('mlp.gate_proj'), w('mlp.up_proj'), w('mlp.down_proj')))
  }
  x = rmsNorm(lastOnly ? lastPosition(x) : x, p('model.norm.weight'), c.rmsNormEps)
  const logits = c.tieWordEmbeddings ? tiedHead(x, p('model.embed_tokens.weight')) : linear(x, p('lm_head.weight'))
  return { logits, kv }
}

/** The stages of a Qwen3 for a member of `model` (`lead`: its model coordinate is 0). */
export function qwen3Stages(c: Qwen3Config, model: number, lead: boolean): Stages {
  const heads = c.nHeads / model,
    kvHeads = qwen3KvHeads(c) / model,
    K = qwen3HeadDim(c)
  const attn = ['input_layernorm', 'q_proj', 'k_proj', 'v_proj', 'q_norm', 'k_norm', 'o_proj']
  const blocks: Stage[] = []
  for (let i = 0; i < c.nLayers; i++) {
    const l = `model.layers.${i}`
    blocks.push(
      {
        names: attn.map((n, j) => `${l}.${j === 0 ? '' : 'self_attn.'}${n}.weight`),
        split: true,
        fn: (x, [g, wq, wk, wv, gq, gk, wo]) => {
          const [B, T] = x.shape as [number, number, number]
          const { cos, sin } = ropeTables({ offset: 0 }, B, T, K, c.ropeTheta)
          const [q, k, v] = qkv(c, rmsNorm(x, g!, c.rmsNormEps), [wq!, wk!, wv!, gq!, gk!], heads, kvHeads, cos, sin)
          const out = attention(q, repeatKv(k, heads / kvHeads), repeatKv(v, heads / kvHeads), { offset: 0 })
          return residual(lead, x, linear(mergeHeads(out), wo!))
        },
      },
      {
        names: ['post_attention_layernorm', 'mlp.gate_proj', 'mlp.up_proj', 'mlp.down_proj'].map(
          (n) => `${l}.${n}.weight`,
        ),
        split: true,
        fn: (x, [g, wg, wu, wd]) => residual(lead, x, swiglu(rmsNorm(x, g!, c.rmsNormEps), wg!, wu!, wd!)),
      },
    )
  }
  return { ...llamaEnds(c), blocks }
}

/** Qwen3 language model. @example new Qwen3LM({ vocabSize: 512, seqLen: 128, dModel: 256, nLayers: 4, nHeads: 8,
 * nKvHeads: 2, headDim: 64 }) */
export class Qwen3LM extends CausalLM<Qwen3Config> {
  constructor(config: Omit<Qwen3ConfigInput, 'type'> & { type?: 'qwen3' }, seed = 0) {
    const c = Qwen3Config.parse({ ...config, type: TYPE })
    if (c.nKvHeads !== undefined && c.nHeads % c.nKvHeads !== 0)
      throw new LevanterError(
        'BAD_CONFIG',
        `model: nHeads ${c.nHeads} is not a multiple of nKvHeads ${c.nKvHeads}; ` +
          `each key/value head serves the same number of query heads`,
      )
    if (qwen3HeadDim(c) % 2 !== 0)
      throw new LevanterError('BAD_CONFIG', `model: headDim ${qwen3HeadDim(c)} must be even (rotary pairs)`)
    super(c, qwen3Specs(c), seed)
  }
  protected run(...args: ForwardArgs): ForwardResult {
    return qwen3Forward(this.config, ...args)
  }
}

function fromHfConfig(j: Record<string, unknown>, file: string): Qwen3ConfigInput {
  const n = (k: string) => {
    if (typeof j[k] !== 'number')
      throw new LevanterError('BAD_CHECKPOINT', `${file}: field "${k}" is missing or not a number`)
    return j[k] as number
  }
  const opt = (k: string) => (j[k] === undefined || j[k] === null ? undefined : n(k))
  if (j.tie_word_embeddings !== undefined && typeof j.tie_word_embeddings !== 'boolean')
    throw new LevanterError('BAD_CHECKPOINT', `${file}: field "tie_word_embeddings" is not true or false`)
  for (const k of ['attention_bias', 'use_sliding_window'])
    if (j[k] === true) throw new LevanterError('BAD_CHECKPOINT', `${file}: ${k} = true is not supported`)
  if (j.rope_scaling !== undefined && j.rope_scaling !== null)
    throw new LevanterError('BAD_CHECKPOINT', `${file}: rope_scaling is not supported for ${CLASS}; remove it`)
  if (j.hidden_act !== undefined && j.hidden_act !== 'silu')
    throw new LevanterError('BAD_CHECKPOINT', `${file}: hidden_act ${JSON.stringify(j.hidden_act)} is not silu`)
  const heads = n('num_attention_heads'),
    kv = opt('num_key_value_heads') ?? heads,
    headDim = opt('head_dim') ?? n('hidden_size') / heads
  return {
    type: TYPE,
    vocabSize: n('vocab_size'),
    seqLen: n('max_position_embeddings'),
    dModel: n('hidden_size'),
    nLayers: n('num_hidden_layers'),
    nHeads: heads,
    intermediateSize: n('intermediate_size'),
    rmsNormEps: n('rms_norm_eps'),
    ropeTheta: opt('rope_theta') ?? 10_000,
    initStd: opt('initializer_range') ?? 0.02,
    ...(headDim !== n('hidden_size') / heads ? { headDim } : {}),
    ...(kv !== heads ? { nKvHeads: kv } : {}),
    ...(j.tie_word_embeddings ? { tieWordEmbeddings: true } : {}),
  }
}

/** Qwen3 as an architecture value (registered by models/builtin.ts). */
export const qwen3Architecture = defineArchitecture({
  type: TYPE,
  config: Qwen3Config,
  specs: qwen3Specs,
  create: (c: Qwen3Config, seed: number) => new Qwen3LM(c, seed),
  // 6 per matmul parameter, and attention's 12·layers·(nHeads·headDim)·seqLen
  flopsPerToken: (c, seqLen, numParams) => 6 * numParams + 12 * c.nLayers * c.nHeads * qwen3HeadDim(c) * seqLen,
  stages: qwen3Stages,
  modelAxis: (c) => [
    { label: 'nKvHeads', value: qwen3KvHeads(c), what: 'key/value heads are split over it' },
    { label: 'the MLP width', value: qwen3Hidden(c), what: 'its columns are split over it' },
  ],
  hf: {
    modelType: TYPE,
    className: CLASS,
    fields: new Map([
      ['vocabSize', 'vocab_size'],
      ['seqLen', 'max_position_embeddings'],
      ['dModel', 'hidden_size'],
      ['nLayers', 'num_hidden_layers'],
      ['nHeads', 'num_attention_heads'],
      ['headDim', 'head_dim'],
      ['intermediateSize', 'intermediate_size'],
      ['nKvHeads', 'num_key_value_heads'],
      ['rmsNormEps', 'rms_norm_eps'],
      ['ropeTheta', 'rope_theta'],
      ['tieWordEmbeddings', 'tie_word_embeddings'],
      ['initStd', 'initializer_range'],
    ]),
    toConfig: (c) => ({
      architectures: [CLASS],
      model_type: TYPE,
      vocab_size: c.vocabSize,
      max_position_embeddings: c.seqLen,
      hidden_size: c.dModel,
      intermediate_size: qwen3Hidden(c),
      num_hidden_layers: c.nLayers,
      num_attention_heads: c.nHeads,
      num_key_value_heads: qwen3KvHeads(c),
      head_dim: qwen3HeadDim(c),
      hidden_act: 'silu',
      attention_bias: false,
      rms_norm_eps: c.rmsNormEps,
      rope_theta: c.ropeTheta,
      initializer_range: c.initStd,
      tie_word_embeddings: c.tieWordEmbeddings ?? false,
      use_sliding_window: false,
    }),
    fromConfig: fromHfConfig,
    // nn.Linear weights: [out, in] in the files, [in, out] here
    transposed: (name) => /(_proj|lm_head)\.weight$/.test(name),
    unusedOk: (c, t) => /\.rotary_emb\.inv_freq$/.test(t) || (t === 'lm_head.weight' && !!c.tieWordEmbeddings),
  },
})
