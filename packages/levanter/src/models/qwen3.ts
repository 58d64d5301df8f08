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
import type { LayerKv } from './batch-cache.js'
import { CausalLM } from './causal-lm.js'
import { Qwen3Config } from './config.js'
import type { Qwen3ConfigInput } from './config.js'
import { lastPosition, linear, rmsNorm, tiedHead } from './layers.js'
import type { ForwardArgs, ForwardResult } from './layers.js'
import {
  attend,
  attentionNames,
  attentionSpecs,
  attentionStage,
  checkLlamaAttention,
  llamaRope,
} from './llama-attention.js'
import type { LlamaAttention } from './llama-attention.js'
import { llamaEnds, swiglu } from './llama.js'
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

/** Qwen3's attention: Llama's with heads of headDim and an RMSNorm over each query and key head. */
export const qwen3Attention = (c: Qwen3Config): LlamaAttention => ({
  dModel: c.dModel,
  nHeads: c.nHeads,
  nKvHeads: qwen3KvHeads(c),
  headDim: qwen3HeadDim(c),
  rmsNormEps: c.rmsNormEps,
  rope: c.ropeTheta,
  qkNorm: true,
})

/** Qwen3's parameters, in order, with their sharding rules. */
export function qwen3Specs(c: Qwen3Config): ParamSpec[] {
  const D = c.dModel,
    F = qwen3Hidden(c),
    a = qwen3Attention(c),
    s = c.initStd,
    proj = s / Math.sqrt(2 * c.nLayers)
  const specs: ParamSpec[] = [mat('model.embed_tokens.weight', [c.vocabSize, D], s)]
  for (let i = 0; i < c.nLayers; i++) {
    const l = `model.layers.${i}`
    specs.push(
      ...attentionSpecs(a, l, s, proj),
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

/** ids [B, T] placed by `at` → logits and each layer's keys/values (see {@link ForwardArgs}). */
export function qwen3Forward(c: Qwen3Config, ...[p, ids, at, past, lastOnly = false]: ForwardArgs): ForwardResult {
  const [B, T] = ids.shape as [number, number]
  const a = qwen3Attention(c)
  const rope = llamaRope(a, at, B, T)
  let x = tf.reshape(tf.gather(p('model.embed_tokens.weight'), tf.reshape(ids, [-1])), [B, T, c.dModel])
  const kv: LayerKv[] = []
  for (let i = 0; i < c.nLayers; i++) {
    const l = `model.layers.${i}`
    const w = (n: string) => p(`${l}.${n}.weight`)
    const attn = attend(a, x, attentionNames(a, l).map(p), rope, at, past?.[i])
    kv.push(attn.kv)
    x = attn.x
    const m = rmsNorm(x, w('post_attention_layernorm'), c.rmsNormEps)
    x = tf.add(x, swiglu(m, w('mlp.gate_proj'), w('mlp.up_proj'), w('mlp.down_proj')))
  }
  x = rmsNorm(lastOnly ? lastPosition(x) : x, p('model.norm.weight'), c.rmsNormEps)
  const logits = c.tieWordEmbeddings ? tiedHead(x, p('model.embed_tokens.weight')) : linear(x, p('lm_head.weight'))
  return { logits, kv }
}

/** The stages of a Qwen3 for a member of `model` (`lead`: its model coordinate is 0). */
export function qwen3Stages(c: Qwen3Config, model: number, lead: boolean): Stages {
  const a = qwen3Attention(c)
  const blocks: Stage[] = []
  for (let i = 0; i < c.nLayers; i++) {
    const l = `model.layers.${i}`
    blocks.push(attentionStage(a, l, model, lead), {
      names: ['post_attention_layernorm', 'mlp.gate_proj', 'mlp.up_proj', 'mlp.down_proj'].map(
        (n) => `${l}.${n}.weight`,
      ),
      split: true,
      fn: (x, [g, wg, wu, wd]) => residual(lead, x, swiglu(rmsNorm(x, g!, c.rmsNormEps), wg!, wu!, wd!)),
    })
  }
  return { ...llamaEnds(c), blocks }
}

/** Qwen3 language model. @example new Qwen3LM({ vocabSize: 512, seqLen: 128, dModel: 256, nLayers: 4, nHeads: 8,
 * nKvHeads: 2, headDim: 64 }) */
export class Qwen3LM extends CausalLM<Qwen3Config> {
  constructor(config: Omit<Qwen3ConfigInput, 'type'> & { type?: 'qwen3' }, seed = 0) {
    const c = Qwen3Config.parse({ ...config, type: TYPE })
    checkLlamaAttention(qwen3Attention(c), 'headDim')
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
