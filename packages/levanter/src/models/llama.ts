/**
 * @module The Llama architecture: RMSNorm, rotary positions (optionally scaled), SwiGLU, grouped-query attention
 * (`nKvHeads` key/value heads shared by nHeads/nKvHeads query heads each; the KV cache keeps only
 * those), untied or tied head. Names are LlamaForCausalLM's; linear weights are stored [in, out]
 * here (Hugging Face stores [out, in]; export transposes). Over the model axis attention splits
 * by heads (q/k/v projections by columns, the output projection by rows) and the MLP by columns
 * (gate, up) then rows (down). The attention, shared with Qwen3 and Mixtral, is models/llama-attention.ts.
 */
import * as tf from '@tensorflow/tfjs'
import { LevanterError } from '../errors.js'
import type { LayerKv } from './batch-cache.js'
import { CausalLM } from './causal-lm.js'
import { LlamaConfig, llamaHidden, llamaKvHeads } from './config.js'
import type { LlamaConfigInput, RopeScaling } from './config.js'
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
import { mat, ones } from './param-spec.js'
import type { ParamSpec } from './param-spec.js'
import { defineArchitecture, transformerFlops } from './registry.js'
import { residual } from './stages.js'
import type { Stage, Stages } from './stages.js'

const TYPE = 'llama'

/** Llama's attention: heads of dModel / nHeads, rotary θ or its scaled frequencies, no QK-norm. */
export const llamaAttention = (c: LlamaConfig): LlamaAttention => ({
  dModel: c.dModel,
  nHeads: c.nHeads,
  nKvHeads: llamaKvHeads(c),
  headDim: c.dModel / c.nHeads,
  rmsNormEps: c.rmsNormEps,
  rope: c.ropeScaling ? ropeInvFreq(c) : c.ropeTheta,
  qkNorm: false,
})

/** Llama's parameters, in order, with their sharding rules. */
export function llamaSpecs(c: LlamaConfig): ParamSpec[] {
  const D = c.dModel,
    F = llamaHidden(c),
    a = llamaAttention(c),
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

/** SwiGLU over normed m [B, T, D]: silu(m·gate)·(m·up), projected down. */
export const swiglu = (m: tf.Tensor, wg: tf.Tensor, wu: tf.Tensor, wd: tf.Tensor): tf.Tensor => {
  const gate = linear(m, wg)
  return linear(tf.mul(tf.mul(gate, tf.sigmoid(gate)), linear(m, wu)), wd)
}

/** ids [B, T] placed by `at` → logits and each layer's keys/values (see {@link ForwardArgs}). */
export function llamaForward(c: LlamaConfig, ...[p, ids, at, past, lastOnly = false]: ForwardArgs): ForwardResult {
  const [B, T] = ids.shape as [number, number]
  const a = llamaAttention(c)
  const rope = llamaRope(a, at, B, T) // [T, K] or [B, 1, T, K]
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

/** The stages of a Llama for a member of `model` (`lead`: its model coordinate is 0). */
export function llamaStages(c: LlamaConfig, model: number, lead: boolean): Stages {
  const a = llamaAttention(c)
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

/**
 * The stages around the blocks that every Llama-family model shares (Llama, Qwen3, Mixtral): the token
 * embedding, and the final RMSNorm with the head (the embedding's transpose when tied).
 */
export function llamaEnds(c: {
  dModel: number
  rmsNormEps: number
  tieWordEmbeddings?: boolean
}): Pick<Stages, 'embed' | 'head'> {
  return {
    embed: {
      names: ['model.embed_tokens.weight'],
      split: false,
      fn: (ids, [w]) => {
        const [B, T] = ids.shape as [number, number]
        return tf.reshape(tf.gather(w!, tf.reshape(ids, [-1])), [B, T, c.dModel])
      },
    },
    head: {
      names: ['model.norm.weight', c.tieWordEmbeddings ? 'model.embed_tokens.weight' : 'lm_head.weight'],
      split: false,
      fn: (x, [g, w]) => {
        const h = rmsNorm(x, g!, c.rmsNormEps)
        return c.tieWordEmbeddings ? tiedHead(h, w!) : linear(h, w!)
      },
    },
  }
}

/** Llama language model. @example new LlamaLM({ vocabSize: 512, seqLen: 128, dModel: 256, nLayers: 4, nHeads: 4 }) */
export class LlamaLM extends CausalLM<LlamaConfig> {
  constructor(config: Omit<LlamaConfigInput, 'type'> & { type?: 'llama' }, seed = 0) {
    const c = LlamaConfig.parse({ ...config, type: TYPE })
    checkLlamaAttention(llamaAttention(c), 'head size')
    super(c, llamaSpecs(c), seed)
  }
  protected run(...args: ForwardArgs): ForwardResult {
    return llamaForward(this.config, ...args)
  }
}

function hfRopeScaling(r: RopeScaling): Record<string, unknown> {
  if (r.type === 'linear') return { rope_type: 'linear', factor: r.factor }
  return {
    rope_type: 'llama3',
    factor: r.factor,
    low_freq_factor: r.lowFreqFactor,
    high_freq_factor: r.highFreqFactor,
    original_max_position_embeddings: r.originalMaxPositionEmbeddings,
  }
}

function fromHfRopeScaling(j: unknown, file: string): RopeScaling | undefined {
  if (j === undefined || j === null) return undefined
  const r = j as Record<string, unknown>
  const kind = r.rope_type ?? r.type
  const n = (k: string) => {
    if (typeof r[k] !== 'number')
      throw new LevanterError('BAD_CHECKPOINT', `${file}: field "rope_scaling.${k}" is missing or not a number`)
    return r[k] as number
  }
  if (kind === 'default') return undefined
  if (kind === 'linear') return { type: 'linear', factor: n('factor') }
  if (kind === 'llama3')
    return {
      type: 'llama3',
      factor: n('factor'),
      lowFreqFactor: n('low_freq_factor'),
      highFreqFactor: n('high_freq_factor'),
      originalMaxPositionEmbeddings: n('original_max_position_embeddings'),
    }
  throw new LevanterError(
    'BAD_CHECKPOINT',
    `${file}: rope_scaling type ${JSON.stringify(kind)} is not supported (linear and llama3 are)`,
  )
}

function fromHfConfig(j: Record<string, unknown>, file: string): LlamaConfigInput {
  const n = (k: string) => {
    if (typeof j[k] !== 'number')
      throw new LevanterError('BAD_CHECKPOINT', `${file}: field "${k}" is missing or not a number`)
    return j[k] as number
  }
  const kv = j.num_key_value_heads ?? j.num_attention_heads
  if (typeof kv !== 'number')
    throw new LevanterError('BAD_CHECKPOINT', `${file}: field "num_key_value_heads" is not a number`)
  if (j.tie_word_embeddings !== undefined && typeof j.tie_word_embeddings !== 'boolean')
    throw new LevanterError('BAD_CHECKPOINT', `${file}: field "tie_word_embeddings" is not true or false`)
  const ropeScaling = fromHfRopeScaling(j.rope_scaling, file)
  const headDim = n('hidden_size') / n('num_attention_heads')
  if (j.head_dim !== undefined && j.head_dim !== null && j.head_dim !== headDim)
    throw new LevanterError(
      'BAD_CHECKPOINT',
      `${file}: head_dim ${String(j.head_dim)} differs from hidden_size / num_attention_heads = ${headDim}; ` +
        `only that head size is supported`,
    )
  for (const k of ['attention_bias', 'mlp_bias'])
    if (j[k] === true) throw new LevanterError('BAD_CHECKPOINT', `${file}: ${k} = true is not supported (no biases)`)
  return {
    type: TYPE,
    vocabSize: n('vocab_size'),
    seqLen: n('max_position_embeddings'),
    dModel: n('hidden_size'),
    nLayers: n('num_hidden_layers'),
    nHeads: n('num_attention_heads'),
    intermediateSize: n('intermediate_size'),
    rmsNormEps: n('rms_norm_eps'),
    ropeTheta: (j.rope_theta as number) ?? 10_000,
    initStd: (j.initializer_range as number) ?? 0.02,
    ...(kv !== n('num_attention_heads') ? { nKvHeads: kv } : {}),
    ...(j.tie_word_embeddings ? { tieWordEmbeddings: true } : {}),
    ...(ropeScaling ? { ropeScaling } : {}),
  }
}

/** Llama as an architecture value (registered by models/builtin.ts). */
export const llamaArchitecture = defineArchitecture({
  type: TYPE,
  config: LlamaConfig,
  specs: llamaSpecs,
  create: (c: LlamaConfig, seed: number) => new LlamaLM(c, seed),
  flopsPerToken: (c, seqLen, numParams) => transformerFlops(c, seqLen, numParams),
  stages: llamaStages,
  modelAxis: (c) => [
    { label: 'nKvHeads', value: llamaKvHeads(c), what: 'key/value heads are split over it' },
    { label: 'the MLP width', value: llamaHidden(c), what: 'its columns are split over it' },
  ],
  hf: {
    modelType: TYPE,
    className: 'LlamaForCausalLM',
    fields: new Map([
      ['vocabSize', 'vocab_size'],
      ['seqLen', 'max_position_embeddings'],
      ['dModel', 'hidden_size'],
      ['nLayers', 'num_hidden_layers'],
      ['nHeads', 'num_attention_heads'],
      ['intermediateSize', 'intermediate_size'],
      ['nKvHeads', 'num_key_value_heads'],
      ['rmsNormEps', 'rms_norm_eps'],
      ['ropeTheta', 'rope_theta'],
      ['tieWordEmbeddings', 'tie_word_embeddings'],
      ['ropeScaling', 'rope_scaling'],
      ['initStd', 'initializer_range'],
    ]),
    toConfig: (c) => ({
      architectures: ['LlamaForCausalLM'],
      model_type: TYPE,
      vocab_size: c.vocabSize,
      max_position_embeddings: c.seqLen,
      hidden_size: c.dModel,
      intermediate_size: llamaHidden(c),
      num_hidden_layers: c.nLayers,
      num_attention_heads: c.nHeads,
      num_key_value_heads: llamaKvHeads(c),
      hidden_act: 'silu',
      rms_norm_eps: c.rmsNormEps,
      rope_theta: c.ropeTheta,
      ...(c.ropeScaling ? { rope_scaling: hfRopeScaling(c.ropeScaling) } : {}),
      initializer_range: c.initStd,
      tie_word_embeddings: c.tieWordEmbeddings ?? false,
    }),
    fromConfig: fromHfConfig,
    // nn.Linear weights: [out, in] in the files, [in, out] here
    transposed: (name) => /(_proj|lm_head)\.weight$/.test(name),
    // a tensor the model would not use (a bias, an extra head) is refused rather than dropped
    unusedOk: (c, t) => /\.rotary_emb\.inv_freq$/.test(t) || (t === 'lm_head.weight' && !!c.tieWordEmbeddings),
  },
})
