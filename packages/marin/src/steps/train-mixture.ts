/**
 * @module What a training step trains on when it is not one token cache: a weighted mixture of the
 * token caches other steps made (`trainStep({ mixture: { web, wiki }, weights }, …)`), trained with
 * levanter's `Dataset.mixture`. The sources, the weights (or stages of weights) and `repeat` are
 * versioned: a changed weight is a new version of the step, and `marin explain` names the field.
 * The weights are checked when the step is defined, so a typo fails before any step runs.
 */
import type { MixtureStage, MixtureWeights } from '@marin/levanter'
import { MarinError } from '../errors.js'
import type { ArtifactRef } from '../executor/artifacts.js'
import { isOutputRef, type Step } from '../executor/step.js'
import { versioned } from '../executor/versioned.js'

/** A weighted mixture of the token caches `mixture`'s steps made, by source name. */
export type TrainMixtureInput = {
  /** Source name → the step that made its token cache (a `tokenizeStep`). */
  readonly mixture: Readonly<Record<string, Step>>
  /** One set of weights for the whole run, or stages in order (`[{ untilStep: 1000, weights }, { weights }]`). */
  readonly weights: MixtureWeights | readonly MixtureStage[]
  /** Let a source that runs out start another epoch (all, or by name). @default false */
  readonly repeat?: boolean | Readonly<Record<string, boolean>>
  /** Rows per block of fixed composition (levanter's `blockSize`). @default 1024 */
  readonly blockSize?: number
}

/** The mixture as its step's resolved config holds it. */
export type ResolvedMixture = {
  readonly sources: Readonly<Record<string, ArtifactRef>>
  readonly weights: MixtureWeights | readonly MixtureStage[]
  readonly repeat: boolean | Readonly<Record<string, boolean>>
  readonly blockSize: number
}

/** The mixture as a training step records it in `artifacts.json` (and the run page shows it). */
export type MixtureSummary = {
  /** Source name → its token cache, `token-caches/<name>@<version>`. */
  readonly sources: Readonly<Record<string, string>>
  /** The stages as given, weights normalized to sum to 1 (one stage when a single set was given). */
  readonly stages: { readonly untilStep: number | null; readonly weights: Record<string, number> }[]
  readonly repeat: boolean | Readonly<Record<string, boolean>>
  /** Tokens each source gave to the steps trained (rows × sequence length). */
  readonly tokensPerSource: Readonly<Record<string, number>>
  /** The last held-out loss of each source alone (nats per token); null where it has no held-out sequences. */
  readonly evalLossPerSource: Readonly<Record<string, number | null>>
  readonly evalBpbPerSource: Readonly<Record<string, number | null>>
}

export const isMixtureInput = (x: unknown): x is TrainMixtureInput =>
  typeof x === 'object' && x !== null && 'mixture' in x && !isOutputRef(x)

/** The stages of `weights` as a list, each checked against the source names; messages name the field. */
export function mixtureStages(
  where: string,
  names: readonly string[],
  weights: MixtureWeights | readonly MixtureStage[],
): MixtureStage[] {
  const bad = (msg: string) => new MarinError('BAD_CONFIG', `${where}: ${msg}`)
  if (typeof weights !== 'object' || weights === null)
    throw bad('data.weights must be { source: weight, … } or [{ untilStep, weights }, …]')
  const stages = Array.isArray(weights)
    ? (weights as readonly MixtureStage[])
    : [{ weights: weights as MixtureWeights }]
  if (stages.length === 0) throw bad('data.weights is an empty list; give at least one stage')
  let prev = 0
  stages.forEach((s, i) => {
    const at = Array.isArray(weights) ? `data.weights[${i}]` : 'data.weights'
    const last = i === stages.length - 1
    if (s.untilStep !== undefined || !last) {
      if (!(Number.isInteger(s.untilStep) && s.untilStep! > prev))
        throw bad(
          `${at}.untilStep is ${s.untilStep}; it must be an integer above ${prev} ` +
            '(stages in order; only the last may leave it out)',
        )
      prev = s.untilStep!
    }
    if (typeof s.weights !== 'object' || s.weights === null) throw bad(`${at}.weights must be { source: weight, … }`)
    let total = 0
    for (const [n, w] of Object.entries(s.weights)) {
      if (!names.includes(n)) throw bad(`${at} names "${n}", which is not a source (${names.join(', ')})`)
      if (!(typeof w === 'number' && Number.isFinite(w) && w >= 0))
        throw bad(`${at}.${n} is ${w}; a weight is a finite number ≥ 0`)
      total += w
    }
    if (!(total > 0)) throw bad(`${at} gives every source weight 0`)
  })
  return [...stages]
}

/** The versioned config of a mixture input, checked: sources become dependencies, the rest versioned values. */
export function mixtureConfig(stepName: string, data: TrainMixtureInput) {
  const where = `step ${stepName}`
  const names = Object.keys(data.mixture ?? {})
  if (names.length === 0)
    throw new MarinError('BAD_STEP', `${where}: data.mixture has no sources; give { name: tokenizeStep, … }`)
  for (const n of names) {
    const s = data.mixture[n] as Partial<Step> | undefined
    if (typeof s?.artifact !== 'function')
      throw new MarinError('BAD_STEP', `${where}: data.mixture.${n} is not a step; give the tokenizeStep of its cache`)
  }
  mixtureStages(where, names, data.weights)
  const repeat = data.repeat ?? false
  if (typeof repeat === 'object')
    for (const n of Object.keys(repeat))
      if (!names.includes(n))
        throw new MarinError('BAD_CONFIG', `${where}: data.repeat names "${n}", which is not a source`)
  const blockSize = data.blockSize ?? 1024
  if (!(Number.isInteger(blockSize) && blockSize >= 1))
    throw new MarinError('BAD_CONFIG', `${where}: data.blockSize ${blockSize} must be a positive integer`)
  return {
    sources: Object.fromEntries(names.map((n) => [n, data.mixture[n]!.artifact()])),
    weights: versioned(data.weights),
    repeat: versioned(repeat),
    // only when given, so that the default keeps the version of steps that leave it out
    ...(data.blockSize !== undefined ? { blockSize: versioned(blockSize) } : {}),
  }
}

/** The stages with weights normalized, for the summary. */
export function normalizedStages(names: readonly string[], weights: ResolvedMixture['weights']) {
  return mixtureStages('mixture', names, weights).map((s) => {
    const total = Object.values(s.weights).reduce((a, b) => a + b, 0)
    return {
      untilStep: s.untilStep ?? null,
      weights: Object.fromEntries(names.map((n) => [n, (s.weights[n] ?? 0) / total])),
    }
  })
}
