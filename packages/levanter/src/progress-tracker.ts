/**
 * @module A tracker that turns metrics into progress lines people read while a run trains:
 * `training step=100/300 loss=3.5 eval_loss=3.75 tokens_per_s=900 eta=1m20s`, one info line per
 * logged step (and one when an evaluation lands), with the newest eval loss (nats per token on the
 * held-out split of the training data) and the time left at the pace so far.
 */
import { logger } from '@marin/rigging'
import type { Tracker } from './trackers.js'

/** The part of a logger the tracker uses. */
export type ProgressLog = { info(obj: Record<string, unknown>, msg: string): void }

export type ProgressTrackerOptions = {
  /** The run's last step. */
  readonly maxSteps: number
  /** The step training starts from (a resumed run's checkpoint). @default 0 */
  readonly startStep?: number
  /** Tokens in one step (batch × sequence): the first line's ETA then comes from that step's own pace. */
  readonly tokensPerStep?: number
  /** @default the `levanter` logger */
  readonly log?: ProgressLog
  /** Milliseconds now. @default Date.now */
  readonly now?: () => number
}

/** `1m20s`, `3h01m`, `45s`. */
export function formatEta(seconds: number): string {
  const s = Math.max(0, Math.round(seconds))
  if (s < 60) return `${s}s`
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`
}

/** Progress lines from the training and eval metrics a Pipeline logs. */
export class ProgressTracker implements Tracker {
  readonly #log: ProgressLog
  readonly #now: () => number
  readonly #startedAt: number
  #first: { step: number; at: number } | undefined
  #loss: number | undefined
  #evalLoss: number | undefined
  #tokensPerSec: number | undefined
  /** Tokens in one step; may be set once the trainer's config is known. */
  tokensPerStep: number | undefined

  constructor(readonly opts: ProgressTrackerOptions) {
    this.tokensPerStep = opts.tokensPerStep
    this.#log = opts.log ?? logger('levanter')
    this.#now = opts.now ?? Date.now
    this.#startedAt = this.#now()
  }

  log(step: number, metrics: Readonly<Record<string, number>>): void {
    const train = metrics['train/loss']
    const evalLoss = metrics['eval/loss']
    if (train === undefined && evalLoss === undefined) return
    if (train !== undefined) this.#loss = train
    if (evalLoss !== undefined) this.#evalLoss = evalLoss
    const tps = metrics['throughput/tokens_per_sec']
    if (tps !== undefined) this.#tokensPerSec = tps
    const now = this.#now()
    // The pace since the first line (no start-up in it), else that of the step just done, else since the tracker was
    // made.
    const from =
      this.#first && step > this.#first.step ? this.#first : { step: this.opts.startStep ?? 0, at: this.#startedAt }
    const ownPace =
      from !== this.#first && this.tokensPerStep && this.#tokensPerSec
        ? this.tokensPerStep / this.#tokensPerSec
        : undefined
    const perStep = ownPace ?? (step > from.step ? (now - from.at) / 1000 / (step - from.step) : undefined)
    this.#first ??= { step, at: now }
    this.#log.info(
      {
        step,
        of: this.opts.maxSteps,
        ...(this.#loss !== undefined ? { loss: this.#loss } : {}),
        ...(this.#evalLoss !== undefined ? { eval_loss: this.#evalLoss } : {}),
        ...(this.#tokensPerSec !== undefined ? { tokens_per_s: Math.round(this.#tokensPerSec) } : {}),
        ...(perStep !== undefined ? { eta: formatEta(perStep * Math.max(0, this.opts.maxSteps - step)) } : {}),
      },
      'training',
    )
  }
}
