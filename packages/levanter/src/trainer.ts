/**
 * @module Trainer: the optimizer, LR schedule, batch shape and the hooks that run every N steps
 * (metrics to trackers, evaluation on the held-out split, checkpoints, your own).
 */
import { z } from 'zod'
import { LevanterError } from './errors.js'
import { AdamWConfig } from './optim/adamw.js'
import { LrSchedule } from './optim/schedule.js'
import { MeshPlacement } from './parallel/placement.js'
import type { Tracker } from './trackers.js'

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
  mesh: z
    .strictObject({
      data: z.number().int().positive().default(1).describe('replicas over the batch (fsdp shards over them)'),
      model: z.number().int().positive().default(1).describe('tensor-parallel members: heads and MLP split'),
    })
    .default({ data: 1, model: 1 })
    .describe('members as fray actors, data × model of them; { data: 1 } trains in this process'),
  fsdp: z
    .boolean()
    .default(false)
    .describe('shard parameters and optimizer state over mesh.data (ZeRO-3): each member owns 1/data of them'),
  placement: MeshPlacement.optional().describe(
    'where mesh members run: { iris: { controller, tokenFile } } places each on an iris worker; @default worker ' +
      'processes of the current fray client',
  ),
  peakFlops: z
    .number()
    .positive()
    .optional()
    .describe('FLOP/s for MFU; @default measured matMul throughput of the backend'),
})
export type TrainerConfigInput = z.input<typeof TrainerConfig>
export type TrainerConfig = z.output<typeof TrainerConfig>

/** What a hook sees after a step. */
export type StepInfo = {
  /** Steps completed (1 after the first). */
  readonly step: number
  readonly loss: number
  readonly lr: number
  readonly gradNorm: number
  readonly tokensPerSec: number
  readonly flopsPerSec: number
  readonly mfu: number
  readonly seconds: number
}

/** A callback run after every `every`-th step. */
export type Hook = { readonly every: number; readonly run: (info: StepInfo) => void | Promise<void> }

/** Options that are objects rather than config. */
export type TrainerExtras = { readonly trackers?: readonly Tracker[]; readonly hooks?: readonly Hook[] }

/**
 * Training settings plus hooks.
 * @example new Trainer({ learningRate: 1e-4, optimizer: 'adamw', batchSize: 16, schedule: { warmupSteps: 100 } })
 */
export class Trainer {
  readonly config: TrainerConfig
  readonly trackers: readonly Tracker[] | undefined
  readonly hooks: Hook[]

  constructor(config: TrainerConfigInput = {}, extras: TrainerExtras = {}) {
    const parsed = TrainerConfig.safeParse(config)
    if (!parsed.success) {
      throw new LevanterError(
        'BAD_CONFIG',
        `trainer config: ` +
          `${parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}`,
      )
    }
    this.config = parsed.data
    if (this.config.batchSize % this.config.mesh.data !== 0) {
      throw new LevanterError(
        'BAD_CONFIG',
        `trainer config: batchSize ${this.config.batchSize} must be a ` +
          `multiple of mesh.data ${this.config.mesh.data}`,
      )
    }
    this.trackers = extras.trackers
    this.hooks = [...(extras.hooks ?? [])]
  }

  /** Run `fn` after every `every`-th step. */
  addHook(every: number, fn: (info: StepInfo) => void | Promise<void>): this {
    this.hooks.push({ every, run: fn })
    return this
  }
}
