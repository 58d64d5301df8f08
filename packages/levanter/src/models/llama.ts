/**
 * @module The Llama architecture: RMSNorm, rotary positions (optionally scaled), SwiGLU, grouped-query attention
 * (`nKvHeads` key/value heads shared by nHeads/nKvHeads query heads each; the KV cache keeps only
 * those), untied or tied head. Names are LlamaForCausalLM's; linear weights are stored [in, out]
 * here (Hugging Face stores [out, in]; export transposes). Over the model axis attention splits
 * by heads (q/k/v projections by columns, the output projection by rows) and the MLP by columns
 * (gate, up) then rows (down). The attention, shared with Qwen3 and Mixtral, is models/llama-attention.ts; the rest
 * they share (parameters, forward pass and stages around the MLP, the Hugging Face config), models/llama-family.ts
 * and models/llama-family-hf.ts.
 */
import { LevanterError } from '../errors.js'
import { CausalLM } from './causal-lm.js'
import { LlamaConfig, llamaHidden } from './config.js'
import type { LlamaConfigInput, RopeScaling } from './config.js'
import type { ForwardArgs, ForwardResult } from './layers.js'
import { checkLlamaAttention } from './llama-attention.js'
import type { LlamaAttention } from './llama-attention.js'
import { familyAttention, familyModel, familyModelAxis, swigluParts } from './llama-family.js'
import { familyHf } from './llama-family-hf.js'
import { defineArchitecture, transformerFlops } from './registry.js'

const TYPE = 'llama'
const CLASS = 'LlamaForCausalLM'

/** Llama's attention: heads of dModel / nHeads, rotary θ or its scaled frequencies, no QK-norm. */
export const llamaAttention = (c: LlamaConfig): LlamaAttention =>
  familyAttention(c, c.ropeScaling ? { rope: ropeInvFreq(c) } : {})

/** Llama's parameters in order with their sharding rules, its forward pass and its stages. */
const llama = familyModel(llamaAttention, swigluParts)

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

/** Llama language model. @example new LlamaLM({ vocabSize: 512, seqLen: 128, dModel: 256, nLayers: 4, nHeads: 4 }) */
export class LlamaLM extends CausalLM<LlamaConfig> {
  constructor(config: Omit<LlamaConfigInput, 'type'> & { type?: 'llama' }, seed = 0) {
    const c = LlamaConfig.parse({ ...config, type: TYPE })
    checkLlamaAttention(llamaAttention(c), 'head size')
    super(c, llama.specs(c), seed)
  }
  protected run(...args: ForwardArgs): ForwardResult {
    return llama.forward(this.config, ...args)
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

/** Llama as an architecture value (registered by models/builtin.ts). */
export const llamaArchitecture = defineArchitecture({
  type: TYPE,
  config: LlamaConfig,
  specs: llama.specs,
  create: (c: LlamaConfig, seed: number) => new LlamaLM(c, seed),
  flopsPerToken: (c, seqLen, numParams) => transformerFlops(c, seqLen, numParams),
  stages: llama.stages,
  modelAxis: (c) => familyModelAxis(c, 'the MLP width', llamaHidden(c)),
  hf: familyHf({
    type: TYPE,
    className: CLASS,
    mlpWidth: llamaHidden,
    fields: { end: [['ropeScaling', 'rope_scaling']] },
    config: (c: LlamaConfig) => ({ afterRope: c.ropeScaling ? { rope_scaling: hfRopeScaling(c.ropeScaling) } : {} }),
    rules: {
      refused: ['attention_bias', 'mlp_bias'],
      why: ' (no biases)',
      ropeScaling: true,
      hiddenAct: false,
      ropeTheta: 10_000,
    },
    extend: (base, _read, j, file): LlamaConfigInput => {
      const headDim = base.dModel / base.nHeads
      if (j.head_dim !== undefined && j.head_dim !== null && j.head_dim !== headDim)
        throw new LevanterError(
          'BAD_CHECKPOINT',
          `${file}: head_dim ${String(j.head_dim)} differs from hidden_size / num_attention_heads = ${headDim}; ` +
            `only that head size is supported`,
        )
      const ropeScaling = fromHfRopeScaling(j.rope_scaling, file)
      return { ...base, ...(ropeScaling ? { ropeScaling } : {}) }
    },
  }),
})
