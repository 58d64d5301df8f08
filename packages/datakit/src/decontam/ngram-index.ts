/**
 * @module Word n-grams of evaluation documents, as a sorted array of 64-bit hashes that a training
 * document is checked against.
 *
 * Words are the dedup's: dupekit's `normalizeText` with punctuation removed (NFKC, lower case,
 * whitespace collapsed), split on spaces. An n-gram is `n` consecutive words joined by one space,
 * hashed with XXH3-64. The index is plain data (typed arrays and strings), so it travels to
 * zephyr's worker processes as a bound argument; a lookup is a binary search, so checking a
 * document costs O(words · log grams) and no set of strings is kept.
 *
 * An evaluation document with fewer than `n` words has no n-gram; it is counted as too short
 * (`NgramIndex.tooShort`), as GPT-3's and lm-eval's 13-gram decontamination leave such documents
 * out rather than match on fewer words.
 *
 * @example
 * const index = await buildNgramIndex([{ task: 'brown_qa', texts: ['…'] }], { n: 13 })
 * matchNgrams(index, trainingText) // { tasks: [0], ngrams: 3 } or undefined
 */
import { normalizeText, xxh3Batch } from '@marin/dupekit'
import { DatakitError } from '../errors.js'

/** The default n: 13 words, as GPT-3's and lm-eval's decontamination use. */
export const DECONTAM_NGRAM = 13

/** Evaluation documents of one task. */
export type EvalTexts = {
  readonly task: string
  readonly texts: Iterable<string> | AsyncIterable<string>
}

/** The n-grams of every task's documents: plain data, structured-cloneable. */
export type NgramIndex = {
  readonly n: number
  /** Task names; ids below index this list. */
  readonly tasks: readonly string[]
  /** Distinct n-gram hashes, ascending. */
  readonly grams: BigUint64Array
  /** The tasks of `grams[i]` are `taskIds[offsets[i]] … taskIds[offsets[i + 1] - 1]`, ascending. */
  readonly offsets: Uint32Array
  readonly taskIds: Uint32Array
  /** Per task: documents read, and those with fewer than `n` words (no n-gram). */
  readonly documents: readonly number[]
  readonly tooShort: readonly number[]
}

/** A training document's overlap with the index. */
export type NgramMatch = {
  /** Ids (into `NgramIndex.tasks`) of the tasks it shares an n-gram with, ascending. */
  readonly tasks: number[]
  /** How many of its n-gram positions are in the index. */
  readonly ngrams: number
}

/** The words of `text` as the dedup normalizes them. */
export function wordsOf(text: string): string[] {
  const t = normalizeText(text, { stripPunctuation: true })
  return t === '' ? [] : t.split(' ')
}

/** XXH3-64 of each n-gram of `words`, in order (empty when there are fewer than `n` words). */
export function ngramHashes(words: readonly string[], n: number): BigUint64Array {
  if (words.length < n) return new BigUint64Array(0)
  const grams = new Array<string>(words.length - n + 1)
  for (let i = 0; i < grams.length; i++) grams[i] = words.slice(i, i + n).join(' ')
  return xxh3Batch(grams)
}

function checkN(n: number): number {
  if (!Number.isInteger(n) || n < 1 || n > 1000)
    throw new DatakitError('INVALID_ARGUMENT', `decontamination: n must be an integer in [1, 1000], got ${n}; e.g. 13`)
  return n
}

/** Builds the index over every task's documents. Task names must be distinct. */
export async function buildNgramIndex(
  sets: readonly EvalTexts[],
  opts: { readonly n?: number } = {},
): Promise<NgramIndex> {
  const n = checkN(opts.n ?? DECONTAM_NGRAM)
  const byGram = new Map<bigint, number[]>()
  const tasks: string[] = []
  const documents: number[] = []
  const tooShort: number[] = []
  for (const set of sets) {
    if (tasks.includes(set.task))
      throw new DatakitError('INVALID_ARGUMENT', `decontamination: task "${set.task}" is given twice; merge its texts`)
    const id = tasks.push(set.task) - 1
    let docs = 0
    let short = 0
    for await (const text of set.texts) {
      if (typeof text !== 'string')
        throw new DatakitError(
          'INVALID_ARGUMENT',
          `decontamination: task "${set.task}" document ${docs} is ${typeof text}, not a string`,
        )
      docs++
      const hashes = ngramHashes(wordsOf(text), n)
      if (hashes.length === 0) short++
      for (const h of hashes) {
        const ids = byGram.get(h)
        if (ids === undefined) byGram.set(h, [id])
        else if (ids[ids.length - 1] !== id) ids.push(id)
      }
    }
    documents.push(docs)
    tooShort.push(short)
  }
  const grams = BigUint64Array.from(byGram.keys()).sort()
  const offsets = new Uint32Array(grams.length + 1)
  let total = 0
  for (let i = 0; i < grams.length; i++) {
    total += byGram.get(grams[i]!)!.length
    offsets[i + 1] = total
  }
  const taskIds = new Uint32Array(total)
  for (let i = 0; i < grams.length; i++) taskIds.set(byGram.get(grams[i]!)!, offsets[i]!)
  return { n, tasks, grams, offsets, taskIds, documents, tooShort }
}

/** Position of `h` in the ascending `grams`, or -1. */
function find(grams: BigUint64Array, h: bigint): number {
  let lo = 0
  let hi = grams.length - 1
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1
    const g = grams[mid]!
    if (g < h) lo = mid + 1
    else if (g > h) hi = mid - 1
    else return mid
  }
  return -1
}

/** The tasks `text` shares an n-gram with, or `undefined` when it shares none. */
export function matchNgrams(index: NgramIndex, text: string): NgramMatch | undefined {
  if (index.grams.length === 0) return undefined
  const hashes = ngramHashes(wordsOf(text), index.n)
  let ngrams = 0
  let seen: Set<number> | undefined
  for (const h of hashes) {
    const at = find(index.grams, h)
    if (at < 0) continue
    ngrams++
    seen ??= new Set()
    for (let k = index.offsets[at]!; k < index.offsets[at + 1]!; k++) seen.add(index.taskIds[k]!)
  }
  return seen === undefined ? undefined : { tasks: [...seen].sort((a, b) => a - b), ngrams }
}
