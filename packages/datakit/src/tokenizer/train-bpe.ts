/**
 * @module Training a byte-level BPE vocabulary.
 *
 * The classic algorithm with incremental pair counts: count the pieces of the
 * corpus once, then repeatedly merge the most frequent adjacent pair, updating
 * only the counts of the words that contain it. A max-heap with lazy deletion
 * finds the next pair; ties go to the pair with the smaller ids, so training is
 * deterministic.
 *
 * Ids: the 256 single bytes first (id = byte value), then merged tokens in the
 * order they were learned, then the special tokens.
 *
 * @example
 * const tok = trainBpe(texts, { vocabSize: 16_000, specialTokens: ['<|endoftext|>'] })
 */
import { DatakitError } from '../errors.js'
import { BYTE_TO_CHAR } from './byte-level.js'
import { BpeTokenizer, pairKey } from './bpe-tokenizer.js'
import { GPT2_PATTERN, compilePattern, pretokenize } from './pretokenize.js'

export type TrainBpeOptions = {
  /** Total ids, the 256 bytes and the special tokens included. */
  vocabSize: number
  /** Appended after the learned tokens, in order. @default [] */
  specialTokens?: readonly string[]
  /** Pre-tokenization regex source. @default GPT2_PATTERN */
  pattern?: string
  /** Stop merging when the best pair occurs fewer times than this. @default 2 */
  minFrequency?: number
  /** Called every few hundred merges with (merges done, merges wanted). */
  onProgress?: (done: number, total: number) => void
}

const PAIR = 2 ** 21
const utf8 = new TextEncoder()

/** A binary max-heap of (count, pair key), ordered by count then smaller key. */
class PairHeap {
  private counts: number[] = []
  private keys: number[] = []
  get size(): number {
    return this.keys.length
  }
  private above(i: number, j: number): boolean {
    const ci = this.counts[i]!
    const cj = this.counts[j]!
    return ci > cj || (ci === cj && this.keys[i]! < this.keys[j]!)
  }
  private swap(i: number, j: number): void {
    ;[this.counts[i], this.counts[j]] = [this.counts[j]!, this.counts[i]!]
    ;[this.keys[i], this.keys[j]] = [this.keys[j]!, this.keys[i]!]
  }
  push(count: number, key: number): void {
    this.counts.push(count)
    this.keys.push(key)
    let i = this.keys.length - 1
    while (i > 0) {
      const p = (i - 1) >> 1
      if (!this.above(i, p)) break
      this.swap(i, p)
      i = p
    }
  }
  pop(): [count: number, key: number] {
    const top: [number, number] = [this.counts[0]!, this.keys[0]!]
    const lastC = this.counts.pop()!
    const lastK = this.keys.pop()!
    if (this.keys.length > 0) {
      this.counts[0] = lastC
      this.keys[0] = lastK
      let i = 0
      for (;;) {
        const l = 2 * i + 1
        const r = l + 1
        let m = i
        if (l < this.keys.length && this.above(l, m)) m = l
        if (r < this.keys.length && this.above(r, m)) m = r
        if (m === i) break
        this.swap(i, m)
        i = m
      }
    }
    return top
  }
}

/**
 * Trains on `texts`, read once: an array, or any iterable or async iterable (a generator over a
 * dataset's records, say), so the corpus need not be in memory: only its distinct pieces and
 * their counts are kept. Returns the tokenizer, or a promise of it for an async iterable.
 * @example
 * async function* texts() { for await (const r of new ParquetReader({ path: shard })) yield r.text }
 * const tok = await trainBpe(texts(), { vocabSize: 16_000, specialTokens: ['<|endoftext|>'] })
 */
export function trainBpe(texts: Iterable<string>, options: TrainBpeOptions): BpeTokenizer
export function trainBpe(texts: AsyncIterable<string>, options: TrainBpeOptions): Promise<BpeTokenizer>
export function trainBpe(
  texts: Iterable<string> | AsyncIterable<string>,
  options: TrainBpeOptions,
): BpeTokenizer | Promise<BpeTokenizer> {
  checkOptions(options)
  const counter = pieceCounter(options.pattern ?? GPT2_PATTERN)
  if (Symbol.asyncIterator in texts)
    return (async () => {
      for await (const text of texts) counter.add(text)
      return merge(counter.done(), options)
    })()
  for (const text of texts as Iterable<string>) counter.add(text)
  return merge(counter.done(), options)
}

function checkOptions({ vocabSize, specialTokens = [] }: TrainBpeOptions): void {
  if (!Number.isInteger(vocabSize) || vocabSize - 256 - specialTokens.length < 0) {
    throw new DatakitError(
      'TOKENIZER_TRAIN_INPUT',
      `vocabSize ${vocabSize} must be an integer of at least 256 + ${specialTokens.length} special tokens`,
    )
  }
  if (vocabSize >= PAIR)
    throw new DatakitError('TOKENIZER_TRAIN_INPUT', `vocabSize ${vocabSize} is above the ${PAIR} supported`)
}

/** 1. Counts the corpus's pieces, one text at a time. */
function pieceCounter(pattern: string): { add(text: string): void; done(): Map<string, number> } {
  const re = compilePattern(pattern)
  const pieceCounts = new Map<string, number>()
  let sawText = false
  let n = 0
  return {
    add(text) {
      if (typeof text !== 'string')
        throw new DatakitError('TOKENIZER_TRAIN_INPUT', `text ${n} is ${typeof text}, not a string`)
      n++
      if (text.length) sawText = true
      for (const piece of pretokenize(text, re)) pieceCounts.set(piece, (pieceCounts.get(piece) ?? 0) + 1)
    },
    done() {
      if (!sawText) throw new DatakitError('TOKENIZER_TRAIN_INPUT', 'no text to train on: the input was empty')
      return pieceCounts
    },
  }
}

function merge(pieceCounts: Map<string, number>, options: TrainBpeOptions): BpeTokenizer {
  const { vocabSize, specialTokens = [], pattern = GPT2_PATTERN, minFrequency = 2, onProgress } = options
  const mergesWanted = vocabSize - 256 - specialTokens.length

  // 2. Words as id sequences, and the counts of adjacent pairs with the words they occur in.
  const words: number[][] = []
  const freq: number[] = []
  for (const [piece, count] of pieceCounts) {
    const bytes = utf8.encode(piece)
    if (bytes.length < 2) continue
    words.push(Array.from(bytes))
    freq.push(count)
  }
  pieceCounts.clear()
  const pairCounts = new Map<number, number>()
  const where = new Map<number, Set<number>>()
  words.forEach((w, wi) => {
    for (let i = 0; i < w.length - 1; i++) {
      const k = pairKey(w[i]!, w[i + 1]!)
      pairCounts.set(k, (pairCounts.get(k) ?? 0) + freq[wi]!)
      let s = where.get(k)
      if (!s) where.set(k, (s = new Set()))
      s.add(wi)
    }
  })
  const heap = new PairHeap()
  for (const [k, c] of pairCounts) heap.push(c, k)

  const tokens: string[] = BYTE_TO_CHAR.slice()
  const vocab = new Map<string, number>(tokens.map((t, i) => [t, i]))
  const merges: Array<[string, string]> = []

  // 3. Merge until the vocabulary is full or no pair is frequent enough.
  const delta = new Map<number, number>()
  while (merges.length < mergesWanted && heap.size > 0) {
    const [count, key] = heap.pop()
    const current = pairCounts.get(key) ?? 0
    if (current !== count) {
      // A stale entry: counts only fall below what was pushed, or a fresher entry exists.
      if (current > 0 && current < count) heap.push(current, key)
      continue
    }
    if (count < minFrequency) break
    const a = Math.floor(key / PAIR)
    const b = key % PAIR
    const str = tokens[a]! + tokens[b]!
    let c = vocab.get(str)
    if (c === undefined) {
      c = tokens.length
      tokens.push(str)
      vocab.set(str, c)
    }
    merges.push([tokens[a]!, tokens[b]!])

    delta.clear()
    for (const wi of where.get(key) ?? []) {
      const w = words[wi]!
      const f = freq[wi]!
      for (let i = 0; i < w.length - 1; i++)
        delta.set(pairKey(w[i]!, w[i + 1]!), (delta.get(pairKey(w[i]!, w[i + 1]!)) ?? 0) - f)
      let n = 0
      for (let i = 0; i < w.length; i++) {
        if (i < w.length - 1 && w[i] === a && w[i + 1] === b) {
          w[n++] = c
          i++
        } else {
          w[n++] = w[i]!
        }
      }
      w.length = n
      for (let i = 0; i < w.length - 1; i++) {
        const k = pairKey(w[i]!, w[i + 1]!)
        delta.set(k, (delta.get(k) ?? 0) + f)
        let s = where.get(k)
        if (!s) where.set(k, (s = new Set()))
        s.add(wi)
      }
    }
    where.delete(key)
    for (const [k, d] of delta) {
      if (d === 0) continue
      const next = (pairCounts.get(k) ?? 0) + d
      if (next > 0) pairCounts.set(k, next)
      else pairCounts.delete(k)
      if (d > 0) heap.push(next, k)
    }
    if (onProgress && merges.length % 500 === 0) onProgress(merges.length, mergesWanted)
  }
  onProgress?.(merges.length, mergesWanted)

  const specials = specialTokens.map((content, i) => ({ id: tokens.length + i, content }))
  return new BpeTokenizer({ vocab, merges, specialTokens: specials, pattern })
}
