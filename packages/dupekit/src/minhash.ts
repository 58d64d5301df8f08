/**
 * @module MinHash signatures of documents.
 *
 * A document becomes a set of shingles (n-grams of code points, or of words),
 * each shingle is hashed once to 32 bits, and signature slot `i` is the minimum
 * of `a_i * x + b_i mod 2^32` over the shingle hashes `x`, where `(a_i, b_i)` come
 * from a seeded generator (`a_i` odd, so each map is a permutation of 32-bit values).
 * The fraction of equal slots between two signatures estimates the Jaccard
 * similarity of their shingle sets.
 *
 * The work runs in a WebAssembly kernel, 16 permutations per pass over the shingles
 * in SIMD lanes. Everything is integer arithmetic, so a signature is the same on every
 * run and machine for the same text and options.
 *
 * @example
 * const mh = new MinHasher()                       // 286 permutations, char 5-grams, seed 42
 * const a = mh.signature('the quick brown fox jumps over the lazy dog')
 * estimateJaccard(a, mh.signature('the quick brown fox jumped over the lazy dog'))
 */
import { DupekitError } from './errors.js'
import { kernels } from './internal/wasm.js'
import { normalizeForKernels, normalizeText, type NormalizeOptions } from './normalize.js'

/** What a shingle is made of: code points (`char`) or whitespace-separated words (`word`). */
export type ShingleKind = 'char' | 'word'

export type MinHashOptions = {
  /** Signature length. @default 286 */
  numPerm?: number
  /** Shingle size in units (code points or words). @default 5 */
  ngram?: number
  /** Code-point or word shingles. @default 'char' */
  shingle?: ShingleKind
  /** Seed of the permutations and of the shingle hash. @default 42 */
  seed?: number
  /** Normalization applied to each document first, or `false` for none. @default {} (see normalizeText) */
  normalize?: NormalizeOptions | false
}

/** The defaults of Marin's fuzzy dedup: 286 permutations in 26 bands of 11, 5-grams, seed 42. */
export const MINHASH_DEFAULTS = { numPerm: 286, numBands: 26, ngram: 5, shingle: 'char', seed: 42 } as const

/** Resolved options of a MinHasher; plain data, so it can be sent to worker threads. */
export type MinHashParams = {
  numPerm: number
  ngram: number
  shingle: ShingleKind
  seed: number
  normalize: NormalizeOptions | false
}

export function resolveMinHashParams(options: MinHashOptions = {}): MinHashParams {
  const p: MinHashParams = {
    numPerm: options.numPerm ?? MINHASH_DEFAULTS.numPerm,
    ngram: options.ngram ?? MINHASH_DEFAULTS.ngram,
    shingle: options.shingle ?? MINHASH_DEFAULTS.shingle,
    seed: options.seed ?? MINHASH_DEFAULTS.seed,
    normalize: options.normalize ?? {},
  }
  if (!Number.isInteger(p.numPerm) || p.numPerm < 1 || p.numPerm > 65536) {
    throw new DupekitError(
      'INVALID_ARGUMENT',
      `MinHash numPerm must be an integer in [1, 65536], got ${p.numPerm}; the default is 286`,
    )
  }
  if (!Number.isInteger(p.ngram) || p.ngram < 1 || p.ngram > 64) {
    throw new DupekitError(
      'INVALID_ARGUMENT',
      `MinHash ngram must be an integer in [1, 64], got ${p.ngram}; the default is 5`,
    )
  }
  if (p.shingle !== 'char' && p.shingle !== 'word') {
    throw new DupekitError(
      'INVALID_ARGUMENT',
      `MinHash shingle must be 'char' or 'word', got ${JSON.stringify(p.shingle)}`,
    )
  }
  if (!Number.isInteger(p.seed) || p.seed < 0 || p.seed > 0xffffffff) {
    throw new DupekitError(
      'INVALID_ARGUMENT',
      `MinHash seed must be an integer in [0, 2^32), got ${p.seed}; the default is 42`,
    )
  }
  return p
}

/** splitmix32: a small, well-mixed generator whose output depends only on the seed. */
function generator(seed: number): () => number {
  let s = seed >>> 0
  return () => {
    s = (s + 0x9e3779b9) | 0
    let z = s
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b)
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35)
    return (z ^ (z >>> 16)) >>> 0
  }
}

const encoder = new TextEncoder()

/** Computes MinHash signatures with fixed options. Reusable; cheap to construct. */
export class MinHasher {
  readonly params: MinHashParams
  /** Slots computed per document: numPerm rounded up to a multiple of 4 (SIMD lanes). */
  private readonly groups: number
  /** `a` (groups × 4) then `b` (groups × 4). */
  private readonly perm: Uint32Array
  private readonly shingleSeed: number

  constructor(options: MinHashOptions = {}) {
    this.params = resolveMinHashParams(options)
    this.groups = Math.ceil(this.params.numPerm / 4)
    const next = generator(this.params.seed)
    this.shingleSeed = next()
    const lanes = this.groups * 4
    this.perm = new Uint32Array(lanes * 2)
    for (let i = 0; i < lanes; i++) {
      this.perm[i] = (next() | 1) >>> 0
      this.perm[lanes + i] = next()
    }
  }

  get numPerm(): number {
    return this.params.numPerm
  }

  /** The text after this hasher's normalization. */
  prepare(text: string): string {
    return this.params.normalize === false ? text : normalizeText(text, this.params.normalize)
  }

  /** The MinHash signature of `text` (length `numPerm`). An empty document gives all 0xffffffff. */
  signature(text: string): Uint32Array {
    const out = new Uint32Array(this.params.numPerm)
    this.signatureInto(text, out, 0)
    return out
  }

  /** Signatures of many documents, flat: document `i` is `[i*numPerm, (i+1)*numPerm)`. */
  signatures(texts: readonly string[]): Uint32Array {
    const k = this.params.numPerm
    const out = new Uint32Array(texts.length * k)
    for (let i = 0; i < texts.length; i++) this.signatureInto(texts[i]!, out, i * k)
    return out
  }

  /** Writes the signature of `text` into `out[offset .. offset+numPerm)`; returns the shingle count. */
  signatureInto(text: string, out: Uint32Array, offset: number): number {
    // Normalization is split: JavaScript does what needs Unicode tables, the kernel
    // folds ASCII case and collapses whitespace while decoding (flags 1 | 2).
    const norm = this.params.normalize
    const t = norm === false ? text : normalizeForKernels(text, norm)
    const flags = norm === false ? 0 : 3
    const m = kernels()
    const lanes = this.groups * 4
    // Layout above base: permutations | signature | shingle hashes | scratch | UTF-8 text.
    const perm = m.base
    const sig = perm + lanes * 8
    const hashes = sig + lanes * 4
    const maxBytes = t.length * 3
    const scratch = hashes + maxBytes * 4 + 16
    const textAt = scratch + maxBytes * 4 + 16
    m.ensure(textAt + maxBytes + 16)
    if (m.resident !== this.perm) {
      m.u32.set(this.perm, perm >>> 2)
      m.resident = this.perm
    }
    const len = encoder.encodeInto(t, m.u8.subarray(textAt)).written
    const n =
      this.params.shingle === 'char'
        ? m.k.charShingles(textAt, len, this.params.ngram, this.shingleSeed, scratch, hashes, flags)
        : m.k.wordShingles(textAt, len, this.params.ngram, this.shingleSeed, scratch, hashes, flags)
    m.k.minhash(hashes, n, perm, this.groups, sig)
    const s = sig >>> 2
    out.set(m.u32.subarray(s, s + this.params.numPerm), offset)
    return n
  }
}

/** The signature of `text` with the given options (builds a MinHasher; reuse one for many documents). */
export function minhashSignature(text: string, options: MinHashOptions = {}): Uint32Array {
  return new MinHasher(options).signature(text)
}

/**
 * Estimated Jaccard similarity: the fraction of slots where the signatures agree.
 * Its standard error is `sqrt(J(1-J)/k)` for `k` slots.
 */
export function estimateJaccard(a: Uint32Array, b: Uint32Array): number {
  if (a.length !== b.length || a.length === 0) {
    throw new DupekitError(
      'INVALID_ARGUMENT',
      `estimateJaccard: signatures must have the same non-zero length, got ${a.length} and ${b.length}`,
    )
  }
  let same = 0
  for (let i = 0; i < a.length; i++) if (a[i] === b[i]) same++
  return same / a.length
}
