/**
 * @module Trainer: the optimizer, LR schedule, batch shape and the hooks that run every N steps
 * (metrics to trackers, evaluation on the held-out split, checkpoints, your own).
 */
import { TrainerConfig, trainerConfigIssues } from './config.js'
import type { TrainerConfigInput } from './config.js'
import { LevanterError } from './errors.js'
import { bf16ProductsUnavailable } from './kernels/native-gemm.js'
import type { Tracker } from './trackers.js'

export { TrainerConfig } from './config.js'
export type { TrainerConfigInput } from './config.js'

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
    const issues = trainerConfigIssues(config)
    if (issues.length) throw new LevanterError('BAD_CONFIG', `trainer config: ${issues.join('; ')}`)
    this.config = TrainerConfig.parse(config)
    const noBf16 = this.config.precision === 'bf16' ? bf16ProductsUnavailable() : undefined
    if (noBf16) throw new LevanterError('BAD_CONFIG', `trainer config: precision bf16: ${noBf16}; use fp32`)
    this.trackers = extras.trackers
    this.hooks = [...(extras.hooks ?? [])]
  }

  /** Run `fn` after every `every`-th step. */
  addHook(every: number, fn: (info: StepInfo) => void | Promise<void>): this {
    this.hooks.push({ every, run: fn })
    return this
  }
}
