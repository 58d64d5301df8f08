/**
 * @module Model configs: zod schemas with a `type` that names the architecture. {@link ModelConfig}
 * is open: a config's `type` selects the schema of the architecture registered under it
 * (models/registry.ts); the built-in schemas are known here without loading any model code.
 */
import { z } from 'zod'

/** The fields every architecture's config has (spread them into its schema). */
export const modelConfigFields = {
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
  ...modelConfigFields,
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
  ...modelConfigFields,
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

/** Qwen3: Llama's block with per-head RMSNorm on queries and keys before rotary, and a head size of its own. */
export const Qwen3Config = z.strictObject({
  type: z.literal('qwen3'),
  ...modelConfigFields,
  intermediateSize: LlamaConfig.shape.intermediateSize,
  headDim: z.number().int().positive().optional().describe('size of each head; @default dModel / nHeads'),
  nKvHeads: LlamaConfig.shape.nKvHeads,
  rmsNormEps: z.number().positive().default(1e-6),
  ropeTheta: z.number().positive().default(1_000_000),
  tieWordEmbeddings: LlamaConfig.shape.tieWordEmbeddings,
})

/** Mixtral (mixture of experts): Llama's attention; each block's MLP is `nExperts` SwiGLU experts behind a linear
 * router that sends every token to its `topK` experts. */
export const MixtralConfig = z.strictObject({
  type: z.literal('mixtral'),
  ...modelConfigFields,
  intermediateSize: LlamaConfig.shape.intermediateSize,
  nKvHeads: LlamaConfig.shape.nKvHeads,
  rmsNormEps: z.number().positive().default(1e-5),
  ropeTheta: z.number().positive().default(1_000_000),
  tieWordEmbeddings: LlamaConfig.shape.tieWordEmbeddings,
  nExperts: z.number().int().min(2).default(8).describe('experts per block'),
  topK: z.number().int().positive().default(2).describe('experts each token is routed to; at most nExperts'),
  routerAuxLossCoef: z
    .number()
    .nonnegative()
    .default(0.001)
    .describe("weight of the router's load-balancing loss added to the training loss"),
})

/** What every model config holds, whatever its architecture. */
export type ModelConfigBase = {
  readonly type: string
  readonly vocabSize: number
  readonly seqLen: number
  readonly dModel: number
  readonly nLayers: number
  readonly nHeads: number
  readonly initStd: number
}

/** Config schemas by architecture `type`: the built-in ones, and those registered with an architecture. */
const schemas = new Map<string, z.ZodType<ModelConfigBase>>(
  [Gpt2Config, LlamaConfig, Qwen3Config, MixtralConfig].map(
    (s) => [s.shape.type.value, s] as [string, z.ZodType<ModelConfigBase>],
  ),
)

/** Make `schema` the config schema of architecture `type` (registerArchitecture calls it). */
export function registerConfigSchema(type: string, schema: z.ZodType<ModelConfigBase>): void {
  schemas.set(type, schema)
}

/** The architecture types whose config schemas are known, sorted. */
export const configTypes = (): string[] => [...schemas.keys()].sort()

/** Any model config: its `type` picks the schema it is checked with. */
export const ModelConfig: z.ZodType<ModelConfig, ModelConfigInput> = z
  .looseObject({ type: z.string().describe('the architecture: a registered type') })
  .transform((v, ctx) => {
    const schema = schemas.get(v.type)
    if (!schema) {
      ctx.issues.push({
        code: 'custom',
        path: ['type'],
        input: v.type,
        message:
          `"${v.type}" is not a registered architecture (registered: ${configTypes().join(', ')}); ` +
          'register it with registerArchitecture',
      })
      return z.NEVER
    }
    const parsed = schema.safeParse(v)
    if (parsed.success) return parsed.data
    for (const issue of parsed.error.issues) ctx.issues.push({ ...issue, input: v } as never)
    return z.NEVER
  }) as unknown as z.ZodType<ModelConfig, ModelConfigInput>
export type Gpt2ConfigInput = z.input<typeof Gpt2Config>
export type Gpt2Config = z.output<typeof Gpt2Config>
export type LlamaConfigInput = z.input<typeof LlamaConfig>
export type LlamaConfig = z.output<typeof LlamaConfig>
export type Qwen3ConfigInput = z.input<typeof Qwen3Config>
export type Qwen3Config = z.output<typeof Qwen3Config>
export type MixtralConfigInput = z.input<typeof MixtralConfig>
export type MixtralConfig = z.output<typeof MixtralConfig>
/** The input of any architecture's config (the built-in ones typed in full). */
export type ModelConfigInput =
  | Gpt2ConfigInput
  | LlamaConfigInput
  | Qwen3ConfigInput
  | MixtralConfigInput
  | ({ readonly type: string; readonly vocabSize: number } & Readonly<Record<string, unknown>>)
/** A checked model config: the shared fields typed, its architecture's own fields beside them. */
export type ModelConfig = ModelConfigBase & { readonly [field: string]: unknown }

/** SwiGLU hidden size of a llama config. */
export function llamaHidden(c: LlamaConfig): number {
  return c.intermediateSize ?? Math.ceil((8 * c.dModel) / 3 / 32) * 32
}
