/**
 * @module A mixture-of-experts architecture in Mixtral's shape (also OLMoE's): Llama's attention (RMSNorm, rotary,
 * grouped-query), and in every block, instead of one SwiGLU MLP, `nExperts` SwiGLU experts (w1 gate, w3 up, w2 down)
 * behind a linear router (`block_sparse_moe.gate`). Each token's router logits go through a softmax, its `topK`
 * experts are kept and their weights renormalised to sum to 1 (as Mixtral does); the block's output is the weighted
 * sum of those experts' outputs. Names are MixtralForCausalLM's; linear weights are stored [in, out] here.
 *
 * Every expert is evaluated densely on every token and masked by the routing weights (zero for the experts not
 * chosen): exact, and fine at small sizes, but it costs nExperts dense MLPs, not topK.
 *
 * The router's load-balancing loss (Switch / Mixtral): per layer nExperts · Σ_e f_e · P_e, where over a sequence's
 * tokens f_e is the share of them with e among their top k (Σ_e f_e = topK, as transformers counts the k slots) and
 * P_e the mean router probability of e; averaged over layers (transformers' `load_balancing_loss_func` pools the
 * layers' tokens before the product instead: the same for one layer). Training adds `routerAuxLossCoef` times it
 * per row, weighted by the row's share of the loss-masked tokens (loss.ts `withAuxLoss`), so microbatches and
 * replicas sum to the whole batch's value. Over the model axis (and with fsdp, which runs the same stages) each
 * expert splits like a dense MLP: columns of w1/w3, rows of w2; the router is replicated, and the model axis's first
 * member adds the router loss (models/stages.ts `Stage.aux`).
 */
import * as tf from '@tensorflow/tfjs'
import { LevanterError } from '../errors.js'
import type { LayerKv } from './batch-cache.js'
import { CausalLM } from './causal-lm.js'
import { MixtralConfig } from './config.js'
import type { MixtralConfigInput } from './config.js'
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

const TYPE = 'mixtral'
const CLASS = 'MixtralForCausalLM'

/** Key/value heads. */
export const mixtralKvHeads = (c: MixtralConfig): number => c.nKvHeads ?? c.nHeads
/** Each expert's SwiGLU hidden size: round(8/3·dModel) up to a multiple of 32 unless given. */
export const mixtralHidden = (c: MixtralConfig): number => c.intermediateSize ?? Math.ceil((8 * c.dModel) / 3 / 32) * 32

const expertNames = (l: string, e: number): string[] =>
  ['w1', 'w3', 'w2'].map((n) => `${l}.block_sparse_moe.experts.${e}.${n}.weight`)

/** Mixtral's attention: Llama's (heads of dModel / nHeads, rotary θ, no QK-norm). */
export const mixtralAttention = (c: MixtralConfig): LlamaAttention => ({
  dModel: c.dModel,
  nHeads: c.nHeads,
  nKvHeads: mixtralKvHeads(c),
  headDim: c.dModel / c.nHeads,
  rmsNormEps: c.rmsNormEps,
  rope: c.ropeTheta,
  qkNorm: false,
})

/** The parameters, in order, with their sharding rules (each expert splits like a dense MLP). */
export function mixtralSpecs(c: MixtralConfig): ParamSpec[] {
  const D = c.dModel,
    F = mixtralHidden(c),
    a = mixtralAttention(c),
    s = c.initStd,
    proj = s / Math.sqrt(2 * c.nLayers)
  const specs: ParamSpec[] = [mat('model.embed_tokens.weight', [c.vocabSize, D], s)]
  for (let i = 0; i < c.nLayers; i++) {
    const l = `model.layers.${i}`
    specs.push(
      ...attentionSpecs(a, l, s, proj),
      ones(`${l}.post_attention_layernorm.weight`, D),
      mat(`${l}.block_sparse_moe.gate.weight`, [D, c.nExperts], s),
    )
    for (let e = 0; e < c.nExperts; e++) {
      const [w1, w3, w2] = expertNames(l, e) as [string, string, string]
      specs.push(mat(w1, [D, F], s, 'column'), mat(w3, [D, F], s, 'column'), mat(w2, [F, D], proj, 'row'))
    }
  }
  specs.push(ones('model.norm.weight', D))
  if (!c.tieWordEmbeddings) specs.push(mat('lm_head.weight', [D, c.vocabSize], s))
  return specs
}

/** 1 where an expert is among a token's top k (probs [N, E]); no gradient flows through the choice. */
const topKMask = (k: number) =>
  tf.customGrad((...args: (tf.Tensor | ((s: tf.Tensor[]) => void))[]) => {
    const probs = args[0] as tf.Tensor
    // at least the k-th largest probability, chosen in float32 from the start: summing oneHot's int32 rows over a
    // non-last axis compiles no shader on webgpu (the mask came out all zeros there). The same 0/1 mask elsewhere,
    // except that a probability tied with the k-th is chosen too (topk would keep only k)
    const kth = tf.slice(
      tf.topk(probs, k).values,
      [...probs.shape.slice(0, -1).map(() => 0), k - 1],
      [...probs.shape.slice(0, -1), 1],
    )
    return {
      value: tf.where(tf.greaterEqual(probs, kth), tf.onesLike(probs), tf.zerosLike(probs)),
      gradFunc: () => [tf.zerosLike(probs)],
    }
  })

/** One block's router over m [B, T, D]: the top-k weights [B, T, E] (renormalised, zero elsewhere), the router
 * probabilities and the chosen-expert mask (for the load-balancing loss). */
function route(
  c: MixtralConfig,
  m: tf.Tensor,
  gate: tf.Tensor,
): { weights: tf.Tensor; probs: tf.Tensor; chosen: tf.Tensor } {
  const probs = tf.softmax(linear(m, gate)) // [B, T, E]
  const chosen = topKMask(c.topK)(probs) as tf.Tensor
  const kept = tf.mul(probs, chosen)
  return { weights: tf.div(kept, tf.sum(kept, -1, true)), probs, chosen }
}

/** One layer's load-balancing loss per row [B] (probs, chosen [B, T, E]), times routerAuxLossCoef / nLayers. */
function layerAux(c: MixtralConfig, probs: tf.Tensor, chosen: tf.Tensor): tf.Tensor {
  const T = probs.shape[1]!
  const product = tf.sum(tf.mul(tf.sum(chosen, 1), tf.sum(probs, 1)), -1) // Σ_e (T·f_e)·(T·P_e)
  return tf.mul(product, (c.routerAuxLossCoef * c.nExperts) / (c.nLayers * T * T))
}

/** Σ_e weights[..., e] · SwiGLU_e(m): every expert run densely, masked by its routing weight. */
function experts(m: tf.Tensor, weights: tf.Tensor, w: readonly tf.Tensor[]): tf.Tensor {
  let out: tf.Tensor | undefined
  const E = w.length / 3
  for (let e = 0; e < E; e++) {
    const [w1, w3, w2] = w.slice(3 * e, 3 * e + 3) as [tf.Tensor, tf.Tensor, tf.Tensor]
    const part = tf.mul(swiglu(m, w1, w3, w2), tf.slice(weights, [0, 0, e], [-1, -1, 1])) // w1 gate, w3 up, w2 down
    out = out ? tf.add(out, part) : part
  }
  return out!
}

/** ids [B, T] placed by `at` → logits, each layer's keys/values and (`aux`) each row's load-balancing loss, times
 * routerAuxLossCoef (see {@link ForwardArgs}). */
export function mixtralForward(c: MixtralConfig, ...[p, ids, at, past, lastOnly = false]: ForwardArgs): ForwardResult {
  const [B, T] = ids.shape as [number, number]
  const a = mixtralAttention(c)
  const rope = llamaRope(a, at, B, T)
  let x = tf.reshape(tf.gather(p('model.embed_tokens.weight'), tf.reshape(ids, [-1])), [B, T, c.dModel])
  const kv: LayerKv[] = []
  let aux: tf.Tensor | undefined // [B]
  for (let i = 0; i < c.nLayers; i++) {
    const l = `model.layers.${i}`
    const w = (n: string) => p(`${l}.${n}.weight`)
    const attn = attend(a, x, attentionNames(a, l).map(p), rope, at, past?.[i])
    kv.push(attn.kv)
    x = attn.x
    const m = rmsNorm(x, w('post_attention_layernorm'), c.rmsNormEps)
    const r = route(c, m, w('block_sparse_moe.gate'))
    const names = Array.from({ length: c.nExperts }, (_, e) => expertNames(l, e)).flat()
    x = tf.add(x, experts(m, r.weights, names.map(p)))
    const la = layerAux(c, r.probs, r.chosen)
    aux = aux ? tf.add(aux, la) : la
  }
  x = rmsNorm(lastOnly ? lastPosition(x) : x, p('model.norm.weight'), c.rmsNormEps)
  const logits = c.tieWordEmbeddings ? tiedHead(x, p('model.embed_tokens.weight')) : linear(x, p('lm_head.weight'))
  return { logits, kv, aux }
}

/** The stages of a Mixtral for a member of `model` (`lead`: its model coordinate is 0, and adds the router loss). */
export function mixtralStages(c: MixtralConfig, model: number, lead: boolean): Stages {
  const a = mixtralAttention(c)
  const blocks: Stage[] = []
  for (let i = 0; i < c.nLayers; i++) {
    const l = `model.layers.${i}`
    const moe = Array.from({ length: c.nExperts }, (_, e) => expertNames(l, e)).flat()
    blocks.push(attentionStage(a, l, model, lead), {
      names: [`${l}.post_attention_layernorm.weight`, `${l}.block_sparse_moe.gate.weight`, ...moe],
      split: true,
      fn: (x, [g, gate, ...w]) => {
        const m = rmsNorm(x, g!, c.rmsNormEps)
        return residual(lead, x, experts(m, route(c, m, gate!).weights, w))
      },
      ...(lead && c.routerAuxLossCoef > 0
        ? {
            aux: (x: tf.Tensor, [g, gate]: tf.Tensor[]) => {
              const r = route(c, rmsNorm(x, g!, c.rmsNormEps), gate!)
              return layerAux(c, r.probs, r.chosen)
            },
          }
        : {}),
    })
  }
  return { ...llamaEnds(c), blocks }
}

/** Mixtral-style mixture-of-experts language model. @example new MixtralLM({ vocabSize: 512, seqLen: 128,
 * dModel: 64, nLayers: 2, nHeads: 4, nKvHeads: 2, nExperts: 4, topK: 2, intermediateSize: 64 }) */
export class MixtralLM extends CausalLM<MixtralConfig> {
  constructor(config: Omit<MixtralConfigInput, 'type'> & { type?: 'mixtral' }, seed = 0) {
    const c = MixtralConfig.parse({ ...config, type: TYPE })
    checkLlamaAttention(mixtralAttention(c), 'head size')
    if (c.topK > c.nExperts)
      throw new LevanterError('BAD_CONFIG', `model: topK ${c.topK} exceeds nExperts ${c.nExperts}; lower topK`)
    super(c, mixtralSpecs(c), seed)
  }
  protected run(...args: ForwardArgs): ForwardResult {
    return mixtralForward(this.config, ...args)
  }
}

function fromHfConfig(j: Record<string, unknown>, file: string): MixtralConfigInput {
  const n = (k: string) => {
    if (typeof j[k] !== 'number')
      throw new LevanterError('BAD_CHECKPOINT', `${file}: field "${k}" is missing or not a number`)
    return j[k] as number
  }
  const opt = (k: string) => (j[k] === undefined || j[k] === null ? undefined : n(k))
  if (j.tie_word_embeddings !== undefined && typeof j.tie_word_embeddings !== 'boolean')
    throw new LevanterError('BAD_CHECKPOINT', `${file}: field "tie_word_embeddings" is not true or false`)
  if (j.sliding_window !== undefined && j.sliding_window !== null)
    throw new LevanterError('BAD_CHECKPOINT', `${file}: sliding_window is not supported for ${CLASS}; set it null`)
  if (j.rope_scaling !== undefined && j.rope_scaling !== null)
    throw new LevanterError('BAD_CHECKPOINT', `${file}: rope_scaling is not supported for ${CLASS}; remove it`)
  if (j.hidden_act !== undefined && j.hidden_act !== 'silu')
    throw new LevanterError('BAD_CHECKPOINT', `${file}: hidden_act ${JSON.stringify(j.hidden_act)} is not silu`)
  const heads = n('num_attention_heads'),
    kv = opt('num_key_value_heads') ?? heads
  return {
    type: TYPE,
    vocabSize: n('vocab_size'),
    seqLen: n('max_position_embeddings'),
    dModel: n('hidden_size'),
    nLayers: n('num_hidden_layers'),
    nHeads: heads,
    intermediateSize: n('intermediate_size'),
    nExperts: n('num_local_experts'),
    topK: n('num_experts_per_tok'),
    routerAuxLossCoef: opt('router_aux_loss_coef') ?? 0.001,
    rmsNormEps: n('rms_norm_eps'),
    ropeTheta: opt('rope_theta') ?? 1_000_000,
    initStd: opt('initializer_range') ?? 0.02,
    ...(kv !== heads ? { nKvHeads: kv } : {}),
    ...(j.tie_word_embeddings ? { tieWordEmbeddings: true } : {}),
  }
}

/** Mixtral as an architecture value (registered by models/builtin.ts). */
export const mixtralArchitecture = defineArchitecture({
  type: TYPE,
  config: MixtralConfig,
  specs: mixtralSpecs,
  create: (c: MixtralConfig, seed: number) => new MixtralLM(c, seed),
  // as a dense decoder whose MLP is the topK experts a token uses (the dense evaluation here runs all of them):
  // 6 per parameter touched, less the experts not chosen, and attention's 12·layers·dModel·seqLen
  flopsPerToken: (c, seqLen, numParams) => {
    const idle = c.nLayers * (c.nExperts - c.topK) * 3 * c.dModel * mixtralHidden(c)
    return 6 * (numParams - idle) + 12 * c.nLayers * c.dModel * seqLen
  },
  stages: mixtralStages,
  modelAxis: (c) => [
    { label: 'nKvHeads', value: mixtralKvHeads(c), what: 'key/value heads are split over it' },
    { label: "each expert's MLP width", value: mixtralHidden(c), what: 'its columns are split over it' },
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
      ['intermediateSize', 'intermediate_size'],
      ['nKvHeads', 'num_key_value_heads'],
      ['nExperts', 'num_local_experts'],
      ['topK', 'num_experts_per_tok'],
      ['routerAuxLossCoef', 'router_aux_loss_coef'],
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
      intermediate_size: mixtralHidden(c),
      num_hidden_layers: c.nLayers,
      num_attention_heads: c.nHeads,
      num_key_value_heads: mixtralKvHeads(c),
      num_local_experts: c.nExperts,
      num_experts_per_tok: c.topK,
      router_aux_loss_coef: c.routerAuxLossCoef,
      output_router_logits: c.routerAuxLossCoef > 0,
      hidden_act: 'silu',
      rms_norm_eps: c.rmsNormEps,
      rope_theta: c.ropeTheta,
      initializer_range: c.initStd,
      tie_word_embeddings: c.tieWordEmbeddings ?? false,
      sliding_window: null,
    }),
    fromConfig: fromHfConfig,
    // nn.Linear weights: [out, in] in the files, [in, out] here
    transposed: (name) => /(_proj|lm_head|\.w[123]|\.gate)\.weight$/.test(name),
    unusedOk: (c, t) => /\.rotary_emb\.inv_freq$/.test(t) || (t === 'lm_head.weight' && !!c.tieWordEmbeddings),
  },
})
