/**
 * @module LSH banding: MinHash signatures to candidate pairs.
 *
 * A signature of `bands × rows` slots is cut into `bands` bands; two documents are
 * candidates when any band matches exactly, which happens with probability
 * `1 - (1 - s^rows)^bands` for Jaccard similarity `s` (see `lshProbability`).
 *
 * Each band's slots hash to a 53-bit key held in one Map per band. A document that
 * lands in an occupied bucket is paired with the bucket's first member only, so a
 * bucket of m documents yields m-1 pairs rather than m(m-1)/2: enough to recover
 * connected components, and linear in the number of documents.
 *
 * @example
 * const lsh = new LshIndex({ numPerm: 286, numBands: 26 })
 * sigs.forEach((s, id) => lsh.add(id, s))
 * uf.unionPairs(lsh.candidatePairs())
 */
import { DupekitError } from './errors.js'
import { MINHASH_DEFAULTS } from './minhash.js'

export type LshOptions = {
  /** Signature length; must be a multiple of numBands. @default 286 */
  numPerm?: number
  /** Number of bands. @default 26 */
  numBands?: number
}

/** Probability that two documents of Jaccard similarity `s` share at least one band. */
export function lshProbability(s: number, bands: number, rows: number): number {
  return 1 - Math.pow(1 - Math.pow(s, rows), bands)
}

/** The similarity where the candidate probability rises fastest: about `(1/bands)^(1/rows)`. */
export function lshThreshold(bands: number, rows: number): number {
  return Math.pow(1 / bands, 1 / rows)
}

export class LshIndex {
  readonly numPerm: number
  readonly numBands: number
  readonly rows: number
  private readonly buckets: Map<number, number>[]
  private pairs = new Uint32Array(1024)
  private pairCount = 0
  private docs = 0

  constructor(options: LshOptions = {}) {
    this.numPerm = options.numPerm ?? MINHASH_DEFAULTS.numPerm
    this.numBands = options.numBands ?? MINHASH_DEFAULTS.numBands
    if (!Number.isInteger(this.numBands) || this.numBands < 1 || this.numPerm % this.numBands !== 0) {
      throw new DupekitError(
        'INVALID_ARGUMENT',
        `LshIndex: numPerm (${this.numPerm}) must be a positive multiple of numBands (${this.numBands}); e.g. 286 = 26 bands × 11 rows`,
      )
    }
    this.rows = this.numPerm / this.numBands
    this.buckets = Array.from({ length: this.numBands }, () => new Map<number, number>())
  }

  /** Documents added so far. */
  get size(): number {
    return this.docs
  }

  /** The key of band `band` of the signature at `sig[offset …]`. */
  bandKey(sig: Uint32Array, band: number, offset = 0): number {
    // Two independent 32-bit hashes of the band's slots, joined into 53 bits.
    let h1 = (0x9e3779b9 ^ band) | 0
    let h2 = (0x85ebca6b + band) | 0
    const start = offset + band * this.rows
    for (let j = start; j < start + this.rows; j++) {
      const v = sig[j]!
      h1 = Math.imul(h1 ^ v, 0x01000193)
      h1 ^= h1 >>> 15
      h2 = Math.imul((h2 << 5) | (h2 >>> 27), 0x5bd1e995) ^ v
    }
    h1 = Math.imul(h1 ^ (h1 >>> 16), 0x85ebca6b)
    h1 ^= h1 >>> 13
    h2 = Math.imul(h2 ^ (h2 >>> 16), 0xc2b2ae35)
    h2 = Math.imul(h2 ^ (h2 >>> 13), 0x27d4eb2f)
    h2 ^= h2 >>> 16
    return (h1 >>> 0) * 2097152 + (h2 >>> 11)
  }

  /**
   * Adds document `id` with signature `sig[offset .. offset+numPerm)` and records a
   * candidate pair with the first earlier document of each matching bucket.
   */
  add(id: number, sig: Uint32Array, offset = 0): void {
    if (sig.length < offset + this.numPerm) {
      throw new DupekitError('INVALID_ARGUMENT', `LshIndex.add(${id}): signature has ${sig.length - offset} slots from offset ${offset}, need ${this.numPerm}`)
    }
    if (!Number.isInteger(id) || id < 0 || id > 0xfffffffe) {
      throw new DupekitError('INVALID_ARGUMENT', `LshIndex.add: id must be an integer in [0, 2^32-1), got ${id}`)
    }
    const start = this.pairCount
    for (let b = 0; b < this.numBands; b++) {
      const key = this.bandKey(sig, b, offset)
      const bucket = this.buckets[b]!
      const first = bucket.get(key)
      if (first === undefined) {
        bucket.set(key, id)
        continue
      }
      if (first === id) continue
      // Several bands often agree on the same partner: record it once.
      let seen = false
      for (let i = start; i < this.pairCount; i += 2) if (this.pairs[i] === first) seen = true
      if (!seen) this.push(first, id)
    }
    this.docs++
  }

  /** Adds documents `firstId, firstId+1, …` from flat signatures (numPerm slots each). */
  addAll(signatures: Uint32Array, firstId = 0): void {
    const count = Math.floor(signatures.length / this.numPerm)
    for (let i = 0; i < count; i++) this.add(firstId + i, signatures, i * this.numPerm)
  }

  private push(a: number, b: number): void {
    if (this.pairCount + 2 > this.pairs.length) {
      const next = new Uint32Array(this.pairs.length * 2)
      next.set(this.pairs)
      this.pairs = next
    }
    this.pairs[this.pairCount++] = a
    this.pairs[this.pairCount++] = b
  }

  /** Candidate pairs so far, flat `[a0, b0, a1, b1, …]`, each pair once per added document. */
  candidatePairs(): Uint32Array {
    return this.pairs.slice(0, this.pairCount)
  }
}
