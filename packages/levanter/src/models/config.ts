/** @module Model configs: zod schemas with a `type` discriminator (`gpt2`, `llama`). */
import { z } from 'zod'

const common = {
  vocabSize: z.number().int().positive().describe('number of token ids'),
  seqLen: z.number().int().positive().default(1024).describe('maximum context length (positions)'),
  dModel: z.number().int().positive().default(768).describe('hidden size'),
  nLayers: z.number().int().positive().default(12).describe('transformer blocks'),
  nHeads: z.number().int().positive().default(12).describe('attention heads; must divide dModel'),
  initStd: z.number().positive().default(0.02).describe('std of the normal init of weight matrices'),
}

/** GPT-2: learned positions, LayerNorm, GELU (tanh approximation), tied embeddings. */
export const Gpt2Config = z.strictObject({
  type: z.literal('gpt2'),
  ...common,
  mlpRatio: z.number().int().positive().default(4).describe('MLP hidden = mlpRatio × dModel'),
  layerNormEps: z.number().positive().default(1e-5),
})

/**
 * Rotary frequency scaling for contexts longer than the model was trained on, as Hugging Face's
 * `rope_scaling`: `linear` divides every frequency by `factor`; `llama3` divides the low
 * frequencies (wavelength above originalMaxPositionEmbeddings / lowFreqFactor) by `factor`, keeps
 * the high ones (wavelength below originalMaxPositionEmbeddings / highFreqFactor) and blends between.
 */
export const RopeScaling = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('linear'), factor: z.number().positive() }),
  z.strictObject({
    type: z.literal('llama3'),
    factor: z.number().positive(),
    lowFreqFactor: z.number().positive(),
    highFreqFactor: z.number().positive(),
    originalMaxPositionEmbeddings: z.number().int().positive(),
  }),
])
export type RopeScaling = z.output<typeof RopeScaling>

/** Llama: RMSNorm, rotary positions, SwiGLU MLP, output head untied unless `tieWordEmbeddings`. */
export const LlamaConfig = z.strictObject({
  type: z.literal('llama'),
  ...common,
  intermediateSize: z
    .number()
    .int()
    .positive()
    .optional()
    .describe('SwiGLU hidden size; @default round(8/3·dModel) up to a multiple of 32'),
  rmsNormEps: z.number().positive().default(1e-5),
  ropeTheta: z.number().positive().default(10_000),
  nKvHeads: z
    .number()
    .int()
    .positive()
    .optional()
    .describe('key/value heads (grouped-query attention); must divide nHeads; @default nHeads'),
  tieWordEmbeddings: z
    .boolean()
    .optional()
    .describe('logits use the embedding matrix (no lm_head.weight); @default false'),
  ropeScaling: RopeScaling.optional().describe('rotary frequency scaling; @default none'),
})

export const ModelConfig = z.discriminatedUnion('type', [Gpt2Config, LlamaConfig])
export type Gpt2ConfigInput = z.input<typeof Gpt2Config>
export type Gpt2Config = z.output<typeof Gpt2Config>
export type LlamaConfigInput = z.input<typeof LlamaConfig>
export type LlamaConfig = z.output<typeof LlamaConfig>
export type ModelConfigInput = z.input<typeof ModelConfig>
export type ModelConfig = z.output<typeof ModelConfig>

/** Key/value heads of a llama config. */
export function llamaKvHeads(c: LlamaConfig): number {
  return c.nKvHeads ?? c.nHeads
}

/** SwiGLU hidden size of a llama config. */
export function llamaHidden(c: LlamaConfig): number {
  return c.intermediateSize ?? Math.ceil((8 * c.dModel) / 3 / 32) * 32
}
