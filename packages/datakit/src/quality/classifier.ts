/**
 * @module A fastText supervised classifier: the vocabulary (words then labels, each by count), an
 * input matrix of `nwords + bucket` rows (words, then hashed word n-grams; held sparsely, the rows
 * training never changed drawn from the seed when read: `input-rows.ts`) and an output matrix of
 * one row per label (a Float32Array), both `dim` wide. A text's hidden vector is the mean of its
 * rows; its label probabilities are the softmax of the output rows against it. Training and
 * prediction share `featuresOf` so that both see exactly the rows fastText's `getLine` gives.
 *
 * @example
 * const clf = trainClassifier(examples, { wordNgrams: 2 })
 * clf.probability('a well written page', '__label__hq') // 0.93
 */
import { DatakitError } from '../errors.js'
import type { InputRows } from './input-rows.js'
import { type SimdKernels, simdKernels } from './simd.js'
import { addWordNgrams, forEachToken, LABEL_PREFIX } from './tokens.js'

/** fastText's hyper-parameters of supervised training, with its defaults (`fasttext supervised`). */
export type ClassifierArgs = {
  /** Width of the word and label vectors. @default 100 */
  readonly dim: number
  /** Starting learning rate, decayed linearly to 0. @default 0.1 */
  readonly lr: number
  /** Passes over the examples. @default 5 */
  readonly epoch: number
  /** Words seen fewer times are left out of the vocabulary. @default 1 */
  readonly minCount: number
  /** Labels seen fewer times are left out. @default 0 */
  readonly minCountLabel: number
  /** Longest word n-gram (1: words only). @default 1 */
  readonly wordNgrams: number
  /** Hash buckets for word n-grams; 0 when `wordNgrams` is 1, as fastText sets it. @default 2000000 */
  readonly bucket: number
  /** Tokens between learning-rate updates. @default 100 */
  readonly lrUpdateRate: number
  /** Seed of the initial vectors and of the label picked from a multi-label example. @default 0 */
  readonly seed: number
}

export const DEFAULT_ARGS: ClassifierArgs = {
  dim: 100,
  lr: 0.1,
  epoch: 5,
  minCount: 1,
  minCountLabel: 0,
  wordNgrams: 1,
  bucket: 2_000_000,
  lrUpdateRate: 100,
  seed: 0,
}

/** Largest `bucket` accepted: n-gram rows are reduced modulo it in double arithmetic. */
export const MAX_BUCKET = 2 ** 26
/** Largest `dim` accepted. */
export const MAX_DIM = 4096

/** Every argument spelled out and checked, with fastText's rule that a model without n-grams has no buckets. */
export function resolveArgs(a: Partial<ClassifierArgs> = {}): ClassifierArgs {
  const r = { ...DEFAULT_ARGS, ...a }
  const int = (k: keyof ClassifierArgs, min: number, max: number) => {
    const v = r[k]
    if (!Number.isInteger(v) || v < min || v > max)
      throw new DatakitError('INVALID_ARGUMENT', `classifier: ${k} must be an integer in [${min}, ${max}], got ${v}`)
  }
  int('dim', 1, MAX_DIM)
  int('epoch', 1, 10_000)
  int('minCount', 1, 2 ** 31 - 1)
  int('minCountLabel', 0, 2 ** 31 - 1)
  int('wordNgrams', 1, 16)
  int('bucket', 0, MAX_BUCKET)
  int('lrUpdateRate', 1, 2 ** 31 - 1)
  int('seed', 0, 2 ** 32 - 1)
  if (!(r.lr > 0 && Number.isFinite(r.lr)))
    throw new DatakitError('INVALID_ARGUMENT', `classifier: lr must be a positive number, got ${r.lr}`)
  if (r.wordNgrams <= 1) r.bucket = 0
  else if (r.bucket === 0)
    throw new DatakitError('INVALID_ARGUMENT', `classifier: wordNgrams ${r.wordNgrams} needs bucket > 0`)
  return r
}

/** A trained classifier: vocabulary, labels and the two matrices. */
export class Classifier {
  readonly args: ClassifierArgs
  /** Words (first `nwords` entries of the vocabulary), by id. */
  readonly words: readonly string[]
  /** Labels with their prefix (`__label__hq`), by id. */
  readonly labels: readonly string[]
  /** `(nwords + bucket) × dim`, the rows training changed stored. */
  readonly input: InputRows
  /** `labels.length × dim`. */
  readonly output: Float32Array
  private readonly wordIds: Map<string, number>
  private readonly labelIds: Map<string, number>
  // scratch, reused by every call: prediction allocates nothing per word
  private rows = new Int32Array(256)
  private hashes = new Int32Array(256)
  private readonly hidden: Float64Array
  private readonly probs: Float64Array
  private readonly kernels: SimdKernels | undefined

  constructor(
    args: ClassifierArgs,
    words: readonly string[],
    labels: readonly string[],
    input: InputRows,
    output: Float32Array,
  ) {
    if (input.count !== words.length + args.bucket || input.dim !== args.dim || input.seed !== args.seed)
      throw new RangeError(`classifier: input rows ${input.count} × ${input.dim} do not fit its vocabulary and args`)
    this.args = args
    this.words = words
    this.labels = labels
    this.input = input
    // the output matrix lives in the SIMD kernels' memory where they apply
    this.kernels = simdKernels(labels.length, args.dim)
    this.kernels?.output.set(output)
    this.output = this.kernels?.output ?? output
    this.wordIds = new Map(words.map((w, i) => [w, i]))
    this.labelIds = new Map(labels.map((l, i) => [l, i]))
    this.hidden = new Float64Array(args.dim)
    this.probs = new Float64Array(labels.length)
  }

  get nwords(): number {
    return this.words.length
  }

  /** Id of `label` (with or without its `__label__` prefix), or -1. */
  labelId(label: string): number {
    return this.labelIds.get(label) ?? this.labelIds.get(LABEL_PREFIX + label) ?? -1
  }

  /**
   * The input rows of `text` into `this.rows`: its known words, then its word n-grams (over every
   * word, known or not, and `</s>`); label tokens are skipped. Returns how many.
   */
  private featuresOf(text: string): number {
    let n = 0
    let nh = 0
    forEachToken(text, (tok, h) => {
      if (tok.startsWith(LABEL_PREFIX)) return
      if (n >= this.rows.length) this.rows = grow(this.rows)
      if (nh >= this.hashes.length) this.hashes = grow(this.hashes)
      const id = this.wordIds.get(tok)
      if (id !== undefined) this.rows[n++] = id
      this.hashes[nh++] = h | 0
    })
    const { wordNgrams, bucket } = this.args
    if (wordNgrams > 1) {
      const need = n + nh * (wordNgrams - 1)
      while (this.rows.length < need) this.rows = grow(this.rows)
      n = addWordNgrams(this.hashes, nh, wordNgrams, bucket, this.nwords, this.rows, n)
    }
    return n
  }

  /** Label probabilities of `text` into `this.probs`; false when it has no known row (no prediction). */
  private forward(text: string): boolean {
    const n = this.featuresOf(text)
    if (n === 0) return false
    this.input.mean(this.rows, n, this.hidden)
    if (this.kernels) softmaxSimd(this.kernels, this.hidden, this.labels.length, this.probs)
    else softmax(this.output, this.hidden, this.labels.length, this.args.dim, this.probs)
    return true
  }

  /**
   * The probability of `label` for `text` (0 to 1), or `undefined` when no word of `text` is known
   * and there are no n-grams (fastText makes no prediction then).
   */
  probability(text: string, label: string): number | undefined {
    const id = this.labelId(label)
    if (id < 0)
      throw new DatakitError(
        'INVALID_ARGUMENT',
        `classifier: no label "${label}"; labels: ${this.labels.slice(0, 20).join(', ')}`,
      )
    return this.forward(text) ? this.probs[id]! : undefined
  }

  /** The `k` most likely labels of `text`, most likely first (fastText's `predict`). */
  predict(text: string, k = 1): { label: string; probability: number }[] {
    if (!this.forward(text)) return []
    // the k best by insertion into a short sorted list: one pass over the labels, no sort of them all
    const best: number[] = []
    const p = this.probs
    for (let i = 0; i < p.length; i++) {
      if (best.length === k && p[i]! <= p[best[k - 1]!]!) continue
      let at = best.length === k ? k - 1 : best.length
      while (at > 0 && p[best[at - 1]!]! < p[i]!) {
        best[at] = best[at - 1]!
        at--
      }
      best[at] = i
    }
    return best.map((i) => ({ label: this.labels[i]!, probability: p[i]! }))
  }

  /** The most likely label of `text`, or `undefined` (as `predict(text, 1)`, without sorting). */
  top(text: string): string | undefined {
    if (!this.forward(text)) return undefined
    let best = 0
    for (let i = 1; i < this.probs.length; i++) if (this.probs[i]! > this.probs[best]!) best = i
    return this.labels[best]
  }
}

function grow(a: Int32Array<ArrayBuffer>): Int32Array<ArrayBuffer> {
  const b = new Int32Array(a.length * 2)
  b.set(a)
  return b
}

/** `hidden` = mean of the `n` input rows listed in `rows` from `from`. */
export function computeHidden(
  input: Float32Array,
  rows: Int32Array,
  from: number,
  n: number,
  dim: number,
  hidden: Float64Array,
): void {
  hidden.fill(0)
  for (let k = from; k < from + n; k++) {
    const off = rows[k]! * dim
    for (let j = 0; j < dim; j++) hidden[j]! += input[off + j]!
  }
  const s = 1 / n
  for (let j = 0; j < dim; j++) hidden[j]! *= s
}

/** `probs` = softmax of the output rows' dot products with `hidden`. */
export function softmax(
  output: Float32Array,
  hidden: Float64Array,
  nlabels: number,
  dim: number,
  probs: Float64Array,
): void {
  let max = Number.NEGATIVE_INFINITY
  let i = 0
  // four rows at a time: each hidden element is read once for four rows, and the four sums are
  // independent chains of additions that overlap
  for (; i + 3 < nlabels; i += 4) {
    const o0 = i * dim
    const o1 = o0 + dim
    const o2 = o1 + dim
    const o3 = o2 + dim
    let s0 = 0
    let s1 = 0
    let s2 = 0
    let s3 = 0
    for (let j = 0; j < dim; j++) {
      const v = hidden[j]!
      s0 += output[o0 + j]! * v
      s1 += output[o1 + j]! * v
      s2 += output[o2 + j]! * v
      s3 += output[o3 + j]! * v
    }
    probs[i] = s0
    probs[i + 1] = s1
    probs[i + 2] = s2
    probs[i + 3] = s3
    if (s0 > max) max = s0
    if (s1 > max) max = s1
    if (s2 > max) max = s2
    if (s3 > max) max = s3
  }
  for (; i < nlabels; i++) {
    const d = dot(output, i * dim, hidden, dim)
    probs[i] = d
    if (d > max) max = d
  }
  let z = 0
  for (let i = 0; i < nlabels; i++) {
    const e = Math.exp(probs[i]! - max)
    probs[i] = e
    z += e
  }
  const s = 1 / z
  for (let i = 0; i < nlabels; i++) probs[i]! *= s
}

/** `softmax` with the dot products in the SIMD kernels (float32, as fastText's), the rest in doubles. */
export function softmaxSimd(k: SimdKernels, hidden: Float64Array, nlabels: number, probs: Float64Array): void {
  k.hidden.set(hidden)
  k.dots()
  const sc = k.scores
  let max = Number.NEGATIVE_INFINITY
  for (let i = 0; i < nlabels; i++) if (sc[i]! > max) max = sc[i]!
  let z = 0
  for (let i = 0; i < nlabels; i++) {
    const e = Math.exp(sc[i]! - max)
    probs[i] = e
    z += e
  }
  const s = 1 / z
  for (let i = 0; i < nlabels; i++) probs[i]! *= s
}

/**
 * The dot product of `dim` elements of `m` from `off` with `v`. Four running sums: one sum is a
 * chain of dependent additions (a few cycles each); four chains overlap.
 */
export function dot(m: Float32Array, off: number, v: Float64Array, dim: number): number {
  let s0 = 0
  let s1 = 0
  let s2 = 0
  let s3 = 0
  let j = 0
  for (; j + 3 < dim; j += 4) {
    s0 += m[off + j]! * v[j]!
    s1 += m[off + j + 1]! * v[j + 1]!
    s2 += m[off + j + 2]! * v[j + 2]!
    s3 += m[off + j + 3]! * v[j + 3]!
  }
  for (; j < dim; j++) s0 += m[off + j]! * v[j]!
  return s0 + s1 + (s2 + s3)
}
