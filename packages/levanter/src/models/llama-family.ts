/**
 * @module What the Llama-family architectures (Llama, Qwen3, Mixtral) share around their blocks' MLPs, once: the
 * config's derived sizes (key/value heads, SwiGLU width), the attention built from a config, and the parameter list,
 * forward pass and stages around each block's MLP ({@link familyModel}). Each architecture's file (models/llama.ts,
 * qwen3.ts, moe.ts) gives only its attention's options, its MLP and what its config adds. The attention itself is
 * models/llama-attention.ts; the Hugging Face config the family shares, models/llama-family-hf.ts.
 */
import * as tf from '@tensorflow/tfjs'
import type { LayerKv } from './batch-cache.js'
import type { ModelConfigBase } from './config.js'
import { lastPosition, linear, rmsNorm, tiedHead } from './layers.js'
import type { ForwardArgs, ForwardResult } from './layers.js'
import { attend, attentionNames, attentionSpecs, attentionStage, llamaRope } from './llama-attention.js'
import type { LlamaAttention } from './llama-attention.js'
import { mat, ones } from './param-spec.js'
import type { ParamSpec } from './param-spec.js'
import type { ModelAxisDim } from './registry.js'
import { residual } from './stages.js'
import type { Stage, Stages } from './stages.js'

/** The config fields every Llama-family model has (their schemas are in models/config.ts). */
export type LlamaFamilyConfig = ModelConfigBase & {
  readonly rmsNormEps: number
  readonly ropeTheta: number
  readonly intermediateSize?: number | undefined
  readonly nKvHeads?: number | undefined
  readonly tieWordEmbeddings?: boolean | undefined
}

/** Key/value heads: nKvHeads, or nHeads (plain multi-head attention). */
export const familyKvHeads = (c: LlamaFamilyConfig): number => c.nKvHeads ?? c.nHeads
/** SwiGLU hidden size (each expert's, in a mixture): round(8/3·dModel) up to a multiple of 32 unless given. */
export const familyHidden = (c: LlamaFamilyConfig): number =>
  c.intermediateSize ?? Math.ceil((8 * c.dModel) / 3 / 32) * 32

/** The attention of `c`: heads of dModel / nHeads, rotary θ and no QK-norm unless `own` says otherwise. */
export const familyAttention = (
  c: LlamaFamilyConfig,
  own: Partial<Pick<LlamaAttention, 'headDim' | 'rope' | 'qkNorm'>> = {},
): LlamaAttention => ({
  dModel: c.dModel,
  nHeads: c.nHeads,
  nKvHeads: familyKvHeads(c),
  headDim: own.headDim ?? c.dModel / c.nHeads,
  rmsNormEps: c.rmsNormEps,
  rope: own.rope ?? c.ropeTheta,
  qkNorm: own.qkNorm ?? false,
})

/** The init std of matrices (`std`) and of each block's two output projections (`proj`: std / √(2·layers)). */
export type FamilyInit = { readonly std: number; readonly proj: number }

/**
 * The parameters in order, with their sharding rules: the token embedding; per block its attention's, the
 * post-attention RMSNorm and `mlp(l, init)` (layer `l`'s MLP); the final RMSNorm, and the head unless tied.
 */
function familySpecs(
  c: LlamaFamilyConfig,
  a: LlamaAttention,
  mlp: (l: string, init: FamilyInit) => ParamSpec[],
): ParamSpec[] {
  const D = c.dModel,
    init = { std: c.initStd, proj: c.initStd / Math.sqrt(2 * c.nLayers) }
  const specs: ParamSpec[] = [mat('model.embed_tokens.weight', [c.vocabSize, D], init.std)]
  for (let i = 0; i < c.nLayers; i++) {
    const l = `model.layers.${i}`
    specs.push(
      ...attentionSpecs(a, l, init.std, init.proj),
      ones(`${l}.post_attention_layernorm.weight`, D),
      ...mlp(l, init),
    )
  }
  specs.push(ones('model.norm.weight', D))
  if (!c.tieWordEmbeddings) specs.push(mat('lm_head.weight', [D, c.vocabSize], init.std))
  return specs
}

/** SwiGLU over normed m [B, T, D]: silu(m·gate)·(m·up), projected down. */
export const swiglu = (m: tf.Tensor, wg: tf.Tensor, wu: tf.Tensor, wd: tf.Tensor): tf.Tensor => {
  const gate = linear(m, wg)
  return linear(tf.mul(tf.mul(gate, tf.sigmoid(gate)), linear(m, wu)), wd)
}

const swigluNames = (l: string): string[] =>
  ['post_attention_layernorm', 'mlp.gate_proj', 'mlp.up_proj', 'mlp.down_proj'].map((n) => `${l}.${n}.weight`)

/** Layer `l`'s dense SwiGLU MLP of width F (gate and up split by columns, down by rows). */
const swigluSpecs = (c: LlamaFamilyConfig, l: string, init: FamilyInit): ParamSpec[] => {
  const D = c.dModel,
    F = familyHidden(c)
  return [
    mat(`${l}.mlp.gate_proj.weight`, [D, F], init.std, 'column'),
    mat(`${l}.mlp.up_proj.weight`, [D, F], init.std, 'column'),
    mat(`${l}.mlp.down_proj.weight`, [F, D], init.proj, 'row'),
  ]
}

/** One block's MLP in the forward pass: its output added to the residual, and its auxiliary loss per row [B]. */
export type FamilyMlp = (l: string, m: tf.Tensor, p: ForwardArgs[0]) => { y: tf.Tensor; aux?: tf.Tensor }

/** Layer `l`'s dense SwiGLU in the forward pass. */
const swigluMlp: FamilyMlp = (l, m, p) => ({
  y: swiglu(m, p(`${l}.mlp.gate_proj.weight`), p(`${l}.mlp.up_proj.weight`), p(`${l}.mlp.down_proj.weight`)),
})

/** ids [B, T] placed by `at` → logits, each layer's keys/values and (when the MLPs give one) the sum of their
 * auxiliary losses per row (see {@link ForwardArgs}). */
function familyForward(
  c: LlamaFamilyConfig,
  a: LlamaAttention,
  mlp: FamilyMlp,
  ...[p, ids, at, past, lastOnly = false]: ForwardArgs
): ForwardResult {
  const [B, T] = ids.shape as [number, number]
  const rope = llamaRope(a, at, B, T) // [T, K] or [B, 1, T, K]
  let x = tf.reshape(tf.gather(p('model.embed_tokens.weight'), tf.reshape(ids, [-1])), [B, T, c.dModel])
  const kv: LayerKv[] = []
  let aux: tf.Tensor | undefined // [B]
  for (let i = 0; i < c.nLayers; i++) {
    const l = `model.layers.${i}`
    const attn = attend(a, x, attentionNames(a, l).map(p), rope, at, past?.[i])
    kv.push(attn.kv)
    x = attn.x
    const out = mlp(l, rmsNorm(x, p(`${l}.post_attention_layernorm.weight`), c.rmsNormEps), p)
    x = tf.add(x, out.y)
    if (out.aux) aux = aux ? tf.add(aux, out.aux) : out.aux
  }
  x = rmsNorm(lastOnly ? lastPosition(x) : x, p('model.norm.weight'), c.rmsNormEps)
  const logits = c.tieWordEmbeddings ? tiedHead(x, p('model.embed_tokens.weight')) : linear(x, p('lm_head.weight'))
  return aux ? { logits, kv, aux } : { logits, kv }
}

/** Layer `l`'s dense SwiGLU as a split stage (its input RMSNorm included). */
const swigluStage = (c: LlamaFamilyConfig, l: string, lead: boolean): Stage => ({
  names: swigluNames(l),
  split: true,
  fn: (x, [g, wg, wu, wd]) => residual(lead, x, swiglu(rmsNorm(x, g!, c.rmsNormEps), wg!, wu!, wd!)),
})

/** The stages for a member of `model` (`lead`: its model coordinate is 0): the embedding, per block its attention
 * and `mlp(l)` (layer `l`'s MLP stage), and the final RMSNorm with the head. */
function familyStages(
  c: LlamaFamilyConfig,
  a: LlamaAttention,
  model: number,
  lead: boolean,
  mlp: (l: string) => Stage,
): Stages {
  const blocks: Stage[] = []
  for (let i = 0; i < c.nLayers; i++) {
    const l = `model.layers.${i}`
    blocks.push(attentionStage(a, l, model, lead), mlp(l))
  }
  return { ...familyEnds(c), blocks }
}

/** The stages around the blocks: the token embedding, and the final RMSNorm with the head (the embedding's
 * transpose when tied). */
function familyEnds(c: LlamaFamilyConfig): Pick<Stages, 'embed' | 'head'> {
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

/** The dimensions the model axis splits besides nHeads: the key/value heads, and `mlpWidth` (`label` names it). */
export const familyModelAxis = (c: LlamaFamilyConfig, label: string, mlpWidth: number): ModelAxisDim[] => [
  { label: 'nKvHeads', value: familyKvHeads(c), what: 'key/value heads are split over it' },
  { label, value: mlpWidth, what: 'its columns are split over it' },
]

/** A block's MLP: its parameters, its forward pass and its split stage (each given the config). */
export type FamilyMlpParts<C extends LlamaFamilyConfig> = {
  readonly specs: (c: C, l: string, init: FamilyInit) => ParamSpec[]
  readonly forward: (c: C) => FamilyMlp
  readonly stage: (c: C, l: string, lead: boolean) => Stage
}

/** The dense SwiGLU MLP of Llama and Qwen3. */
export const swigluParts: FamilyMlpParts<LlamaFamilyConfig> = {
  specs: swigluSpecs,
  forward: () => swigluMlp,
  stage: swigluStage,
}

/** The parameters, forward pass and stages of a member whose attention for `c` is `attention(c)` and whose blocks'
 * MLP is `mlp`. */
export function familyModel<C extends LlamaFamilyConfig>(
  attention: (c: C) => LlamaAttention,
  mlp: FamilyMlpParts<C>,
): {
  specs: (c: C) => ParamSpec[]
  forward: (c: C, ...args: ForwardArgs) => ForwardResult
  stages: (c: C, model: number, lead: boolean) => Stages
} {
  return {
    specs: (c) => familySpecs(c, attention(c), (l, init) => mlp.specs(c, l, init)),
    forward: (c, ...args) => familyForward(c, attention(c), mlp.forward(c), ...args),
    stages: (c, model, lead) => familyStages(c, attention(c), model, lead, (l) => mlp.stage(c, l, lead)),
  }
}
