/**
 * @module lm-evaluation-harness few-shot contexts. A document's context is
 * `description + Σ (example text + target_delimiter + example answer + fewshot_delimiter) + text`,
 * its examples drawn from the few-shot pool by the task's sampler:
 *
 * - `default`: one `random.Random(seed)` per task (seed 1234, the harness's `fewshot_random_seed`),
 *   one `sample(pool, n)` per document in evaluation order; when the few-shot split is the test split
 *   (both unset counts as equal) it draws `n + 1`, removes documents equal to the evaluated one and
 *   keeps the first `n`. `PythonRandom` reproduces CPython's draws, so contexts match the harness's.
 * - `first_n`: the pool's first `n` (documents equal to the evaluated one removed, under the same rule).
 *
 * An example's answer is `choices[target]` when the target is an index and the task has choices, the
 * first target when it is a list, else the target's text; an example with an empty answer is its text
 * alone. With multiple inputs (Winogrande) the example's text is `choices[text]`.
 */
import { isDeepStrictEqual } from 'node:util'
import { MarinError } from '../errors.js'
import type { Doc } from './lm-eval-functions.js'
import type { DocField } from './lm-eval-fields.js'
import { asIndex, choicesOf, value } from './lm-eval-fields.js'
import { PythonRandom } from './python-random.js'

export const FEWSHOT_SAMPLERS = ['default', 'first_n'] as const
export type FewshotSampler = (typeof FEWSHOT_SAMPLERS)[number]

/** Where examples come from and how they are written (`fewshot_config` over the task's own fields). */
export type FewshotSpec = {
  /** The pool, `process_docs` applied (inline `samples` as written). */
  readonly docs: readonly Doc[]
  /** Says where the pool came from, for errors and records: `split "train"`, `fewshot_config.samples`. */
  readonly from: string
  readonly sampler: FewshotSampler
  /** Draw one more and drop documents equal to the evaluated one (the few-shot split is the test split). */
  readonly excludeEvalDoc: boolean
  readonly docToText: DocField
  readonly docToTarget: DocField
  readonly docToChoice?: DocField
  readonly targetDelimiter: string
  readonly fewshotDelimiter: string
}

/** The documents needed in the pool for `n` examples. */
export const poolNeeded = (spec: Pick<FewshotSpec, 'sampler' | 'excludeEvalDoc'>, n: number) =>
  spec.sampler === 'default' && spec.excludeEvalDoc ? n + 1 : n

/** Draws each document's examples in evaluation order; one per task run, as the harness seeds one per task. */
export class FewshotDrawer {
  private readonly rnd: PythonRandom
  constructor(
    readonly spec: FewshotSpec,
    seed: number,
  ) {
    this.rnd = new PythonRandom(seed)
  }

  /** The `n` examples for `evalDoc` (the next draw). */
  draw(n: number, evalDoc: Doc): Doc[] {
    const { docs, excludeEvalDoc } = this.spec
    if (n === 0) return []
    const other = (xs: readonly Doc[]) => (excludeEvalDoc ? xs.filter((x) => !isDeepStrictEqual(x, evalDoc)) : [...xs])
    const picked =
      this.spec.sampler === 'first_n'
        ? other(docs).slice(0, n)
        : other(this.rnd.sample(docs.length, poolNeeded(this.spec, n)).map((i) => docs[i]!)).slice(0, n)
    if (picked.length !== n)
      throw new MarinError(
        'BAD_CONFIG',
        `few-shot: ${n} examples wanted from ${this.spec.from}, ${picked.length} left after removing ` +
          `documents equal to the evaluated one; lower num_fewshot`,
      )
    return picked
  }
}

/** One example as the harness writes it: text, target delimiter, answer, few-shot delimiter. */
export function exampleText(spec: FewshotSpec, doc: Doc, multipleInputs: boolean, where: string): string {
  const what = (k: string) => `${where}: fewshot ${k} of an example from ${spec.from}`
  let q = value(spec.docToText, doc, what('doc_to_text'))
  let choices = spec.docToChoice !== undefined ? choicesOf(spec.docToChoice, doc, what('doc_to_choice')) : undefined
  const a = value(spec.docToTarget, doc, what('doc_to_target'))
  if (choices !== undefined && !Array.isArray(choices))
    throw new MarinError('BAD_CONFIG', `${what('doc_to_choice')}: expected a list, got ${JSON.stringify(choices)}`)
  const ch = choices as unknown[] | undefined
  if (multipleInputs) {
    const i = asIndex(q)
    if (i === undefined || !ch || ch[i] === undefined)
      throw new MarinError('BAD_CONFIG', `${what('doc_to_text')}: ${JSON.stringify(q)} is not an index of the choices`)
    q = ch[i]
    choices = undefined
  }
  if (typeof q !== 'string')
    throw new MarinError('BAD_CONFIG', `${what('doc_to_text')}: expected text, got ${JSON.stringify(q)}`)
  if (a === null || a === undefined || a === '') return q
  const idx = asIndex(a)
  const answer =
    choices !== undefined && idx !== undefined ? ch![idx] : Array.isArray(a) ? (a as unknown[])[0] : String(a)
  if (typeof answer !== 'string')
    throw new MarinError(
      'BAD_CONFIG',
      `${what('doc_to_target')}: ${JSON.stringify(a)} does not name an answer among ${JSON.stringify(ch)}`,
    )
  return q + spec.targetDelimiter + answer + spec.fewshotDelimiter
}
