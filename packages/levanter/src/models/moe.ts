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
import { CausalLM } from './causal-lm.js'
import { MixtralConfig } from './config.js'
import type { MixtralConfigInput } from './config.js'
import { linear, rmsNorm } from './layers.js'
import type { ForwardArgs, ForwardResult } from './layers.js'
import { checkLlamaAttention } from './llama-attention.js'
import type { LlamaAttention } from './llama-attention.js'
import { familyAttention, familyHidden, familyModel, familyModelAxis, swiglu } from './llama-family.js'
import type { FamilyMlpParts } from './llama-family.js'
import { familyHf } from './llama-family-hf.js'
import { mat } from './param-spec.js'
import { defineArchitecture } from './registry.js'
import { residual } from './stages.js'

const TYPE = 'mixtral'
const CLASS = 'MixtralForCausalLM'

const expertNames = (l: string, e: number): string[] =>
  ['w1', 'w3', 'w2'].map((n) => `${l}.block_sparse_moe.experts.${e}.${n}.weight`)
const allExpertNames = (c: MixtralConfig, l: string): string[] =>
  Array.from({ length: c.nExperts }, (_, e) => expertNames(l, e)).flat()

/** Mixtral's attention: Llama's (heads of dModel / nHeads, rotary θ, no QK-norm). */
export const mixtralAttention = (c: MixtralConfig): LlamaAttention => familyAttention(c)

/** Layer `l`'s router and experts, with their sharding rules (each expert splits like a dense MLP). */
const moeSpecs: FamilyMlpParts<MixtralConfig>['specs'] = (c, l, { std, proj }) => {
  const D = c.dModel,
    F = familyHidden(c)
  const specs = [mat(`${l}.block_sparse_moe.gate.weight`, [D, c.nExperts], std)]
  for (let e = 0; e < c.nExperts; e++) {
    const [w1, w3, w2] = expertNames(l, e) as [string, string, string]
    specs.push(mat(w1, [D, F], std, 'column'), mat(w3, [D, F], std, 'column'), mat(w2, [F, D], proj, 'row'))
  }
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

/** One block's sparse MLP in the forward pass: the routed experts, and the layer's load-balancing loss per row
 * [B], times routerAuxLossCoef (the forward pass's `aux` is their sum). */
const moeMlp: FamilyMlpParts<MixtralConfig>['forward'] = (c) => (l, m, p) => {
  const r = route(c, m, p(`${l}.block_sparse_moe.gate.weight`))
  return { y: experts(m, r.weights, allExpertNames(c, l).map(p)), aux: layerAux(c, r.probs, r.chosen) }
}

/** Layer `l`'s sparse MLP as a split stage (its input RMSNorm included; the lead adds the router loss). */
const moeStage: FamilyMlpParts<MixtralConfig>['stage'] = (c, l, lead) => ({
  names: [`${l}.post_attention_layernorm.weight`, `${l}.block_sparse_moe.gate.weight`, ...allExpertNames(c, l)],
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

/** Mixtral's parameters in order with their sharding rules, its forward pass (`aux`: each row's load-balancing loss)
 * and its stages (the model axis's first member adds the router loss). */
const mixtral = familyModel(mixtralAttention, { specs: moeSpecs, forward: moeMlp, stage: moeStage })

/** Mixtral-style mixture-of-experts language model. @example new MixtralLM({ vocabSize: 512, seqLen: 128,
 * dModel: 64, nLayers: 2, nHeads: 4, nKvHeads: 2, nExperts: 4, topK: 2, intermediateSize: 64 }) */
export class MixtralLM extends CausalLM<MixtralConfig> {
  constructor(config: Omit<MixtralConfigInput, 'type'> & { type?: 'mixtral' }, seed = 0) {
    const c = MixtralConfig.parse({ ...config, type: TYPE })
    checkLlamaAttention(mixtralAttention(c), 'head size')
    if (c.topK > c.nExperts)
      throw new LevanterError('BAD_CONFIG', `model: topK ${c.topK} exceeds nExperts ${c.nExperts}; lower topK`)
    super(c, mixtral.specs(c), seed)
  }
  protected run(...args: ForwardArgs): ForwardResult {
    return mixtral.forward(this.config, ...args)
  }
}

/** Mixtral as an architecture value (registered by models/builtin.ts). */
export const mixtralArchitecture = defineArchitecture({
  type: TYPE,
  config: MixtralConfig,
  specs: mixtral.specs,
  create: (c: MixtralConfig, seed: number) => new MixtralLM(c, seed),
  // as a dense decoder whose MLP is the topK experts a token uses (the dense evaluation here runs all of them):
  // 6 per parameter touched, less the experts not chosen, and attention's 12·layers·dModel·seqLen
  flopsPerToken: (c, seqLen, numParams) => {
    const idle = c.nLayers * (c.nExperts - c.topK) * 3 * c.dModel * familyHidden(c)
    return 6 * (numParams - idle) + 12 * c.nLayers * c.dModel * seqLen
  },
  stages: mixtral.stages,
  modelAxis: (c) => familyModelAxis(c, "each expert's MLP width", familyHidden(c)),
  hf: familyHf({
    type: TYPE,
    className: CLASS,
    mlpWidth: familyHidden,
    fields: {
      afterKv: [
        ['nExperts', 'num_local_experts'],
        ['topK', 'num_experts_per_tok'],
        ['routerAuxLossCoef', 'router_aux_loss_coef'],
      ],
    },
    config: (c: MixtralConfig) => ({
      afterKv: {
        num_local_experts: c.nExperts,
        num_experts_per_tok: c.topK,
        router_aux_loss_coef: c.routerAuxLossCoef,
        output_router_logits: c.routerAuxLossCoef > 0,
      },
      end: { sliding_window: null },
    }),
    rules: { refused: [], ropeScaling: false, hiddenAct: true, ropeTheta: 1_000_000 },
    extend: (base, { n, opt }, j, file): MixtralConfigInput => {
      if (j.sliding_window !== undefined && j.sliding_window !== null)
        throw new LevanterError('BAD_CHECKPOINT', `${file}: sliding_window is not supported for ${CLASS}; set it null`)
      return {
        ...base,
        nExperts: n('num_local_experts'),
        topK: n('num_experts_per_tok'),
        routerAuxLossCoef: opt('router_aux_loss_coef') ?? 0.001,
      }
    },
    transposed: /(_proj|lm_head|\.w[123]|\.gate)\.weight$/,
  }),
})
