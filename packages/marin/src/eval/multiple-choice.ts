/**
 * @module Multiple-choice scoring as lm-eval-harness defines it, shared by marin's JSONL tasks
 * (`run-task.ts`) and lm-eval YAML tasks (`lm-eval-run.ts`): from each choice's log-likelihood,
 * `acc` takes the most likely choice; `acc_norm` divides each log-likelihood by the choice's length
 * in characters (Python's `len`: Unicode code points, so an emoji is one, not two UTF-16 units);
 * `acc_bytes` divides by its length in UTF-8 bytes. Ties go to the first choice, as `np.argmax`.
 */
import { mean, meanStderr, utf8Length } from './stats.js'

/** One metric's mean and standard error (run-task's `MetricValue`). */
type Metric = { readonly metric: string; readonly value: number; readonly stderr: number }

/** The chosen index of each criterion and whether it is the gold one (1 or 0). */
export type ChoiceScore = {
  readonly pred: number
  readonly predNorm: number
  readonly predBytes: number
  readonly acc: number
  readonly accNorm: number
  readonly accBytes: number
}

/** A choice's length as Python's `len` counts it: code points. */
export const characterLength = (s: string): number => [...s].length

/** The first index of the largest value. */
export const argmax = (xs: readonly number[]): number => xs.reduce((best, v, i) => (v > xs[best]! ? i : best), 0)

/**
 * Scores one document: `lls[i]` is the log-likelihood of `choices[i]` (the choice text itself, without
 * the target delimiter: what lm-eval measures the length of). An empty choice counts as length 1.
 */
export function scoreChoices(lls: readonly number[], choices: readonly string[], gold: number): ChoiceScore {
  const per = (len: (s: string) => number) => argmax(lls.map((ll, i) => ll / Math.max(1, len(choices[i]!))))
  const pred = argmax(lls),
    predNorm = per(characterLength),
    predBytes = per(utf8Length)
  const hit = (p: number) => (p === gold ? 1 : 0)
  return { pred, predNorm, predBytes, acc: hit(pred), accNorm: hit(predNorm), accBytes: hit(predBytes) }
}

/** `acc`, `acc_norm` and `acc_bytes` over the documents' scores: means with their standard errors. */
export function multipleChoiceMetrics(scores: readonly ChoiceScore[]): Map<string, Metric> {
  const metric = (name: string, xs: number[]): [string, Metric] => [
    name,
    { metric: name, value: mean(xs), stderr: meanStderr(xs) },
  ]
  return new Map([
    metric(
      'acc',
      scores.map((s) => s.acc),
    ),
    metric(
      'acc_norm',
      scores.map((s) => s.accNorm),
    ),
    metric(
      'acc_bytes',
      scores.map((s) => s.accBytes),
    ),
  ])
}
