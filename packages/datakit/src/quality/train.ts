/**
 * @module Supervised training as fastText does it on one thread: the vocabulary is counted first
 * (words by `minCount`, labels by `minCountLabel`, each sorted by count), then SGD runs over the
 * examples in order, cyclically, until `epoch` times the token count has been read; the learning
 * rate falls linearly to 0 with the tokens read (updated every `lrUpdateRate` tokens); each
 * example updates against one of its labels picked at random, with a softmax loss over all labels,
 * the gradient of the hidden vector divided by the example's row count.
 *
 * Unlike fastText, the examples are turned into input rows once, not on every epoch: the passes
 * then read flat Int32Arrays, and nothing is allocated inside them. Only the input rows the
 * examples use are allocated (with 2M hash buckets, a small fraction of the matrix), each drawn
 * with the initial value it has in the whole matrix, so training is what it would be on all of it.
 * The two loops over the output matrix (the softmax's dot products and the rank-one update) run in
 * WebAssembly SIMD (`simd.ts`)
 * when `dim` is a multiple of 4, else in JavaScript four labels at a time.
 */
import { DatakitError } from '../errors.js'
import { type ClassifierArgs, Classifier, computeHidden, resolveArgs, softmax, softmaxSimd } from './classifier.js'
import { drawRow } from './init-values.js'
import { InputRows } from './input-rows.js'
import { type SimdKernels, simdKernels } from './simd.js'
import { addWordNgrams, forEachToken, LABEL_PREFIX } from './tokens.js'

/** A labelled example: a fastText line (`__label__hq some text`), or labels and text apart. */
export type LabelledExample = string | { readonly labels: readonly string[]; readonly text: string }

/** What training saw, for the step's metadata. */
export type TrainStats = {
  readonly examples: number
  /** Examples without a label or without a known word (fastText skips them too). */
  readonly skipped: number
  readonly tokens: number
  readonly words: number
  readonly labels: number
  /** Mean loss over the last epoch's updates. */
  readonly loss: number
}

/** A trained classifier (its stored input rows: those training changed, all a model file keeps) and what it saw. */
export type TrainResult = { classifier: Classifier; stats: TrainStats }

const withPrefix = (l: string) => (l.startsWith(LABEL_PREFIX) ? l : LABEL_PREFIX + l)

/** The tokens of one example in fastText's order: its labels, then its text (a line as fastText reads it). */
function exampleText(e: LabelledExample, i: number): string {
  if (typeof e === 'string') return e
  if (typeof e?.text !== 'string' || !Array.isArray(e.labels))
    throw new DatakitError('INVALID_ARGUMENT', `classifier: example ${i} needs labels (an array) and text (a string)`)
  return `${e.labels.map(withPrefix).join(' ')} ${e.text}`
}

/** Trains a classifier on `examples` with fastText's supervised defaults, overridden by `args`. */
export function trainClassifier(examples: readonly LabelledExample[], args: Partial<ClassifierArgs> = {}): TrainResult {
  return trainFromLines(examples.map(exampleText), resolveArgs(args))
}

function trainFromLines(lines: readonly string[], a: ClassifierArgs): TrainResult {
  // 1. The vocabulary: counts in order of first appearance, then sorted by count (ties: first seen).
  const counts = new Map<string, number>()
  let ntokens = 0
  for (const line of lines) {
    forEachToken(line, (tok) => {
      counts.set(tok, (counts.get(tok) ?? 0) + 1)
      ntokens++
    })
  }
  const entries = [...counts.entries()]
  const byCount = (x: [string, number], y: [string, number]) => y[1] - x[1]
  const words = entries
    .filter(([t, c]) => !t.startsWith(LABEL_PREFIX) && c >= a.minCount)
    .sort(byCount)
    .map(([t]) => t)
  const labels = entries
    .filter(([t, c]) => t.startsWith(LABEL_PREFIX) && c >= a.minCountLabel)
    .sort(byCount)
    .map(([t]) => t)
  if (labels.length === 0)
    throw new DatakitError(
      'INVALID_ARGUMENT',
      `classifier: none of the ${lines.length} examples has a label; write labels as ${LABEL_PREFIX}NAME`,
    )
  const wordIds = new Map(words.map((w, i) => [w, i]))
  const labelIds = new Map(labels.map((l, i) => [l, i]))
  const nwords = words.length
  const { dim, wordNgrams, bucket } = a

  // 2. Every example as input rows and label ids, once.
  let rows = new Int32Array(1 << 16)
  let nrows = 0
  const rowStart = new Int32Array(lines.length + 1)
  const labelFlat: number[] = []
  const labelStart = new Int32Array(lines.length + 1)
  const lineTokens = new Int32Array(lines.length)
  let hashes = new Int32Array(256)
  let skipped = 0
  for (let e = 0; e < lines.length; e++) {
    let nh = 0
    let toks = 0
    forEachToken(lines[e]!, (tok, h) => {
      toks++
      const lid = labelIds.get(tok)
      if (lid !== undefined) {
        labelFlat.push(lid)
        return
      }
      if (tok.startsWith(LABEL_PREFIX)) return
      const wid = wordIds.get(tok)
      if (nrows + 1 > rows.length) rows = growTo(rows, nrows + 1)
      if (wid !== undefined) rows[nrows++] = wid
      if (nh >= hashes.length) hashes = growTo(hashes, nh + 1)
      hashes[nh++] = h | 0
    })
    if (wordNgrams > 1) {
      rows = growTo(rows, nrows + nh * (wordNgrams - 1))
      nrows = addWordNgrams(hashes, nh, wordNgrams, bucket, nwords, rows, nrows)
    }
    lineTokens[e] = toks
    if (nrows === rowStart[e] || labelFlat.length === labelStart[e]) skipped++
    rowStart[e + 1] = nrows
    labelStart[e + 1] = labelFlat.length
  }
  const labelIdx = Int32Array.from(labelFlat)

  // 3. The matrices: the input rows the examples use, renumbered in order of first use and drawn
  // as the whole matrix has them; output rows zero.
  const nin = nwords + bucket
  const slotOf = new Int32Array(nin) // 1 + the row's compact number, 0 while unused
  const used: number[] = []
  for (let k = 0; k < nrows; k++) {
    const r = rows[k]!
    let s = slotOf[r]!
    if (s === 0) {
      used.push(r)
      s = used.length
      slotOf[r] = s
    }
    rows[k] = s - 1
  }
  const input = new Float32Array(used.length * dim)
  for (let k = 0; k < used.length; k++) drawRow(a.seed, used[k]!, dim, input, k * dim)
  // the output matrix in the SIMD kernels' memory where they apply (dim a multiple of 4)
  const kernels = simdKernels(labels.length, dim)
  const output = kernels?.output ?? new Float32Array(labels.length * dim)
  const touched = new Uint8Array(used.length)

  // 4. SGD, one example at a time, in order, until epoch × ntokens tokens have been read.
  const hidden = new Float64Array(dim)
  const grad = new Float64Array(dim)
  const probs = new Float64Array(labels.length)
  const nlabels = labels.length
  let rng = (a.seed ^ 0x2545f491) >>> 0 || 1
  const total = a.epoch * ntokens
  let tokenCount = 0
  let local = 0
  let lossSum = 0
  let lossN = 0
  const lastEpochFrom = (a.epoch - 1) * ntokens
  for (let e = 0; tokenCount < total; e = e + 1 === lines.length ? 0 : e + 1) {
    const lr = a.lr * (1 - tokenCount / total)
    local += lineTokens[e]!
    const r0 = rowStart[e]!
    const n = rowStart[e + 1]! - r0
    const l0 = labelStart[e]!
    const nl = labelStart[e + 1]! - l0
    if (n > 0 && nl > 0) {
      // xorshift32 picks the target among the example's labels
      rng ^= rng << 13
      rng ^= rng >>> 17
      rng ^= rng << 5
      rng >>>= 0
      const target = labelIdx[l0 + (nl === 1 ? 0 : rng % nl)]!
      const p = update(input, output, rows, r0, n, target, lr, dim, nlabels, hidden, grad, probs, touched, kernels)
      if (tokenCount >= lastEpochFrom) {
        lossSum -= Math.log(p + 1e-5)
        lossN++
      }
    }
    if (local > a.lrUpdateRate) {
      tokenCount += local
      local = 0
    }
  }
  const classifier = new Classifier(a, words, labels, changedRows(input, used, touched, nin, a), output)
  const stats: TrainStats = {
    examples: lines.length,
    skipped,
    tokens: ntokens,
    words: nwords,
    labels: nlabels,
    loss: lossN > 0 ? lossSum / lossN : 0,
  }
  return { classifier, stats }
}

/** The rows training changed, by ascending id, out of the compact `input` whose row `k` is row `used[k]`. */
function changedRows(
  input: Float32Array,
  used: readonly number[],
  touched: Uint8Array,
  nin: number,
  a: ClassifierArgs,
): InputRows {
  const order: number[] = []
  for (let k = 0; k < used.length; k++) if (touched[k]) order.push(k)
  order.sort((x, y) => used[x]! - used[y]!)
  const { dim } = a
  const ids = new Uint32Array(order.length)
  const values = new Float32Array(order.length * dim)
  order.forEach((k, i) => {
    ids[i] = used[k]!
    values.set(input.subarray(k * dim, (k + 1) * dim), i * dim)
  })
  return new InputRows(nin, dim, a.seed, ids, values)
}

/**
 * One SGD step on the example whose rows are `rows[r0 .. r0 + n)` against label `target`; returns
 * the probability it had. The output rows' update and the hidden gradient share one pass: the
 * gradient takes each row's value before its update, as fastText's order gives.
 */
function update(
  input: Float32Array,
  output: Float32Array,
  rows: Int32Array,
  r0: number,
  n: number,
  target: number,
  lr: number,
  dim: number,
  nlabels: number,
  hidden: Float64Array,
  grad: Float64Array,
  probs: Float64Array,
  touched: Uint8Array,
  k: SimdKernels | undefined,
): number {
  computeHidden(input, rows, r0, n, dim, hidden)
  if (k) {
    softmaxSimd(k, hidden, nlabels, probs)
    const alpha = k.scores
    for (let i = 0; i < nlabels; i++) alpha[i] = lr * ((i === target ? 1 : 0) - probs[i]!)
    k.grad.fill(0)
    k.rank1()
    addGradient(input, rows, r0, n, dim, k.grad, touched)
    return probs[target]!
  }
  softmax(output, hidden, nlabels, dim, probs)
  grad.fill(0)
  let i = 0
  // four labels at a time: each hidden and gradient element is read once for four output rows
  for (; i + 3 < nlabels; i += 4) {
    const a0 = lr * ((i === target ? 1 : 0) - probs[i]!)
    const a1 = lr * ((i + 1 === target ? 1 : 0) - probs[i + 1]!)
    const a2 = lr * ((i + 2 === target ? 1 : 0) - probs[i + 2]!)
    const a3 = lr * ((i + 3 === target ? 1 : 0) - probs[i + 3]!)
    const o0 = i * dim
    const o1 = o0 + dim
    const o2 = o1 + dim
    const o3 = o2 + dim
    for (let j = 0; j < dim; j++) {
      const h = hidden[j]!
      const w0 = output[o0 + j]!
      const w1 = output[o1 + j]!
      const w2 = output[o2 + j]!
      const w3 = output[o3 + j]!
      grad[j]! += a0 * w0 + a1 * w1 + (a2 * w2 + a3 * w3)
      output[o0 + j] = w0 + a0 * h
      output[o1 + j] = w1 + a1 * h
      output[o2 + j] = w2 + a2 * h
      output[o3 + j] = w3 + a3 * h
    }
  }
  for (; i < nlabels; i++) {
    const alpha = lr * ((i === target ? 1 : 0) - probs[i]!)
    const off = i * dim
    for (let j = 0; j < dim; j++) {
      const w = output[off + j]!
      grad[j]! += alpha * w
      output[off + j] = w + alpha * hidden[j]!
    }
  }
  addGradient(input, rows, r0, n, dim, grad, touched)
  return probs[target]!
}

/** Each of the example's input rows += `grad / n`, marked touched. */
function addGradient(
  input: Float32Array,
  rows: Int32Array,
  r0: number,
  n: number,
  dim: number,
  grad: Float32Array | Float64Array,
  touched: Uint8Array,
): void {
  const s = 1 / n
  for (let j = 0; j < dim; j++) grad[j]! *= s
  for (let k = r0; k < r0 + n; k++) {
    const row = rows[k]!
    touched[row] = 1
    const off = row * dim
    for (let j = 0; j < dim; j++) input[off + j]! += grad[j]!
  }
}

function growTo(a: Int32Array<ArrayBuffer>, need: number): Int32Array<ArrayBuffer> {
  if (need <= a.length) return a
  let len = a.length
  while (len < need) len *= 2
  const b = new Int32Array(len)
  b.set(a)
  return b
}
