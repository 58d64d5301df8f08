/**
 * @module The Qwen3 architecture: Llama's block (RMSNorm, rotary positions, SwiGLU, grouped-query attention) with
 * an RMSNorm over each query and key head (weights `q_norm`/`k_norm` of size headDim, applied before rotary), a head
 * size of its own (`headDim`, so q_proj is dModel × nHeads·headDim) and an untied head unless `tieWordEmbeddings`.
 * Names are Qwen3ForCausalLM's; linear weights are stored [in, out] here (Hugging Face stores [out, in]). Over the
 * model axis attention splits by heads and the MLP by columns then rows, as Llama's; the per-head norms are
 * replicated (every head uses the same weights).
 */
import { CausalLM } from './causal-lm.js'
import { Qwen3Config } from './config.js'
import type { Qwen3ConfigInput } from './config.js'
import type { ForwardArgs, ForwardResult } from './layers.js'
import { checkLlamaAttention } from './llama-attention.js'
import type { LlamaAttention } from './llama-attention.js'
import { familyAttention, familyHidden, familyModel, familyModelAxis, swigluParts } from './llama-family.js'
import { familyHf } from './llama-family-hf.js'
import { defineArchitecture } from './registry.js'

const TYPE = 'qwen3'
const CLASS = 'Qwen3ForCausalLM'

/** Size of each attention head. */
export const qwen3HeadDim = (c: Qwen3Config): number => c.headDim ?? c.dModel / c.nHeads

/** Qwen3's attention: Llama's with heads of headDim and an RMSNorm over each query and key head. */
export const qwen3Attention = (c: Qwen3Config): LlamaAttention =>
  familyAttention(c, { headDim: qwen3HeadDim(c), qkNorm: true })

/** Qwen3's parameters in order with their sharding rules, its forward pass and its stages. */
const qwen3 = familyModel(qwen3Attention, swigluParts)

/** Qwen3 language model. @example new Qwen3LM({ vocabSize: 512, seqLen: 128, dModel: 256, nLayers: 4, nHeads: 8,
 * nKvHeads: 2, headDim: 64 }) */
export class Qwen3LM extends CausalLM<Qwen3Config> {
  constructor(config: Omit<Qwen3ConfigInput, 'type'> & { type?: 'qwen3' }, seed = 0) {
    const c = Qwen3Config.parse({ ...config, type: TYPE })
    checkLlamaAttention(qwen3Attention(c), 'headDim')
    super(c, qwen3.specs(c), seed)
  }
  protected run(...args: ForwardArgs): ForwardResult {
    return qwen3.forward(this.config, ...args)
  }
}

/** Qwen3 as an architecture value (registered by models/builtin.ts). */
export const qwen3Architecture = defineArchitecture({
  type: TYPE,
  config: Qwen3Config,
  specs: qwen3.specs,
  create: (c: Qwen3Config, seed: number) => new Qwen3LM(c, seed),
  // 6 per matmul parameter, and attention's 12·layers·(nHeads·headDim)·seqLen
  flopsPerToken: (c, seqLen, numParams) => 6 * numParams + 12 * c.nLayers * c.nHeads * qwen3HeadDim(c) * seqLen,
  stages: qwen3.stages,
  modelAxis: (c) => familyModelAxis(c, 'the MLP width', familyHidden(c)),
  hf: familyHf({
    type: TYPE,
    className: CLASS,
    mlpWidth: familyHidden,
    fields: { afterHeads: [['headDim', 'head_dim']] },
    config: (c: Qwen3Config) => ({
      afterKv: { head_dim: qwen3HeadDim(c) },
      afterAct: { attention_bias: false },
      end: { use_sliding_window: false },
    }),
    rules: {
      refused: ['attention_bias', 'use_sliding_window'],
      ropeScaling: false,
      hiddenAct: true,
      ropeTheta: 10_000,
    },
    extend: (base, { opt }): Qwen3ConfigInput => {
      const headDim = opt('head_dim')
      return { ...base, ...(headDim !== undefined && headDim !== base.dModel / base.nHeads ? { headDim } : {}) }
    },
  }),
})
