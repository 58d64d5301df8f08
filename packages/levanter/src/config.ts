/**
 * @module levanter's configuration as zod schemas, importable without loading tfjs
 * (`@marin/levanter/config`): the trainer's settings (optimizer, schedule, batch, checkpoints,
 * the mesh and where its members run) and the model configs, with their input and resolved types,
 * and {@link trainerConfigIssues}, the trainer's whole check as messages. Callers that only define
 * or check a run (marin's steps) import this; the `Trainer` (trainer.ts) checks with the same.
 */
import { z } from 'zod'
import { AdamWConfig } from './optim/adamw-config.js'
import { LrSchedule } from './optim/schedule.js'
import { MeshConfig, MeshPlacement } from './parallel/mesh-config.js'

export { AdamWConfig } from './optim/adamw-config.js'
export type { AdamWConfigInput } from './optim/adamw-config.js'
export { LrSchedule } from './optim/schedule.js'
export type { LrScheduleInput } from './optim/schedule.js'
export { MeshConfig, MeshPlacement } from './parallel/mesh-config.js'
export type { MeshConfigInput } from './parallel/mesh-config.js'
export {
  Gpt2Config,
  LlamaConfig,
  MixtralConfig,
  ModelConfig,
  Qwen3Config,
  RopeScaling,
  modelConfigFields,
} from './models/config.js'
export type {
  Gpt2ConfigInput,
  LlamaConfigInput,
  MixtralConfigInput,
  ModelConfigBase,
  ModelConfigInput,
  Qwen3ConfigInput,
} from './models/config.js'

export const TrainerConfig = z.strictObject({
  learningRate: z.number().positive().default(6e-4).describe('peak learning rate'),
  optimizer: z.literal('adamw').default('adamw'),
  ...AdamWConfig.shape,
  schedule: LrSchedule.default({ decay: 'cosine', warmupSteps: 0, minLrRatio: 0.1 }),
  batchSize: z.number().int().positive().default(16).describe('sequences per step (the global batch)'),
  microbatches: z
    .number()
    .int()
    .positive()
    .default(1)
    .describe('gradient accumulation: split each step into this many passes'),
  seed: z.number().int().nonnegative().default(0).describe('data order (and nothing else: init has its own seed)'),
  logEvery: z.number().int().positive().default(10),
  evalEvery: z.number().int().nonnegative().default(0).describe('0 disables evaluation'),
  evalBatches: z.number().int().positive().default(2),
  checkpointEvery: z.number().int().nonnegative().default(0).describe('0 disables checkpoints'),
  keepEvery: z
    .number()
    .int()
    .positive()
    .nullable()
    .default(null)
    .describe('checkpoints at multiples of this are kept for good'),
  keepLatest: z.number().int().positive().default(2).describe('other checkpoints: keep only the latest few'),
  checkpointStore: z.string().optional().describe('finestore URL or path for checkpoints'),
  runName: z
    .string()
    .regex(/^[a-z0-9][a-z0-9._-]*$/)
    .default('run')
    .describe('checkpoint artifact is checkpoints/<runName>'),
  runDir: z.string().optional().describe('metrics.jsonl goes here; @default levanter-runs/<runName>'),
  mesh: MeshConfig.default({ data: 1, model: 1 }).describe(
    'members as fray actors, data × model of them; { data: 1 } trains in this process',
  ),
  fsdp: z
    .boolean()
    .default(false)
    .describe('shard parameters and optimizer state over mesh.data (ZeRO-3): each member owns 1/data of them'),
  placement: MeshPlacement.optional().describe(
    'where mesh members run: { iris: { controller, tokenFile } } places each on an iris worker; @default worker ' +
      'processes of the current fray client',
  ),
  precision: z
    .enum(['fp32', 'bf16'])
    .default('fp32')
    .describe(
      "the matrix products' operands: bf16 rounds them to bfloat16 and sums in float32 (the native bf16 GEMM: " +
        'vdpbf16ps or AMX where the CPU has them, else emulated on AVX2, no faster than fp32; on every mesh layout, ' +
        'each member setting it around its own calls); ' +
        'master weights and AdamW stay float32',
    ),
  peakFlops: z
    .number()
    .positive()
    .optional()
    .describe('FLOP/s for MFU; @default measured matMul throughput of the backend'),
})
export type TrainerConfigInput = z.input<typeof TrainerConfig>
export type TrainerConfig = z.output<typeof TrainerConfig>

/**
 * Everything wrong with a trainer config, one message per problem, each naming its field after
 * `prefix` (`trainer.` gives `trainer.mesh.data: Too small: …`): the schema's issues, then the rule
 * across fields (batchSize a multiple of mesh.data). Empty when the config is good.
 * @example
 * trainerConfigIssues({ batchSize: 3, mesh: { data: 2 } }) // ['batchSize 3 must be a multiple of mesh.data 2']
 */
export function trainerConfigIssues(config: unknown, prefix = ''): string[] {
  const parsed = TrainerConfig.safeParse(config)
  if (!parsed.success) {
    return parsed.error.issues.flatMap((i) => {
      const at = i.path.map(String)
      // one message per unknown key, named by its full path (`mesh.pipe`), as a typo is looked for
      if (i.code === 'unrecognized_keys') return i.keys.map((k) => `${prefix}${[...at, k].join('.')}: ${i.message}`)
      return [`${prefix}${at.join('.') || '(root)'}: ${i.message}`]
    })
  }
  const { batchSize, mesh } = parsed.data
  if (batchSize % mesh.data !== 0)
    return [`${prefix}batchSize ${batchSize} must be a multiple of ${prefix}mesh.data ${mesh.data}`]
  return []
}
