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

/** Llama: RMSNorm, rotary positions, SwiGLU MLP, untied output head. */
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
})

export const ModelConfig = z.discriminatedUnion('type', [Gpt2Config, LlamaConfig])
export type Gpt2ConfigInput = z.input<typeof Gpt2Config>
export type Gpt2Config = z.output<typeof Gpt2Config>
export type LlamaConfigInput = z.input<typeof LlamaConfig>
export type LlamaConfig = z.output<typeof LlamaConfig>
export type ModelConfigInput = z.input<typeof ModelConfig>
export type ModelConfig = z.output<typeof ModelConfig>

/** SwiGLU hidden size of a llama config. */
export function llamaHidden(c: LlamaConfig): number {
  return c.intermediateSize ?? Math.ceil((8 * c.dModel) / 3 / 32) * 32
}
