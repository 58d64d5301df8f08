/**
 * @module LSH banding: MinHash signatures to candidate pairs.
 *
 * A signature of `bands × rows` slots is cut into `bands` bands; two documents are
 * candidates when any band matches exactly, which happens with probability
 * `1 - (1 - s^rows)^bands` for Jaccard similarity `s` (see `lshProbability`).
 *
 * Each band's slots hash to a 64-bit bucket key (the band index is mixed in), kept in
 * one open-addressing table of typed arrays: 12 bytes per slot, at most 3/4 full, so
 * about 16-32 bytes per band per document and no per-entry objects. A document that
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
  return 1 - (1 - s ** rows) ** bands
}

/** The similarity where the candidate probability rises fastest: about `(1/bands)^(1/rows)`. */
export function lshThreshold(bands: number, rows: number): number {
  return (1 / bands) ** (1 / rows)
}

export class LshIndex {
  readonly numPerm: number
  readonly numBands: number
  readonly rows: number
  /** Open addressing, 3 words per slot: key low, key high, first id + 1 (0 = empty). */
  private table = new Uint32Array(3 << 16)
  private mask = (1 << 16) - 1
  private used = 0
  private pairs = new Uint32Array(1024)
  private pairCount = 0
  private docs = 0
  // The last band key, as two u32 halves (no allocation per band).
  private k1 = 0
  private k2 = 0

  constructor(options: LshOptions = {}) {
    this.numPerm = options.numPerm ?? MINHASH_DEFAULTS.numPerm
    this.numBands = options.numBands ?? MINHASH_DEFAULTS.numBands
    if (!Number.isInteger(this.numBands) || this.numBands < 1 || this.numPerm % this.numBands !== 0) {
      throw new DupekitError(
        'INVALID_ARGUMENT',
        `LshIndex: numPerm (${this.numPerm}) must be a positive multiple ` +
          `of numBands (${this.numBands}); e.g. 286 = 26 bands × 11 rows`,
      )
    }
    this.rows = this.numPerm / this.numBands
  }

  /** Documents added so far. */
  get size(): number {
    return this.docs
  }

  /** Hashes band `band` of the signature at `sig[offset …]` into k1, k2. */
  private bandKey(sig: Uint32Array, band: number, offset: number): void {
    // Two independent 32-bit hashes of the band's slots, both seeded by the band index.
    let h1 = (0x9e3779b9 ^ band) | 0
    let h2 = (0x85ebca6b + Math.imul(band, 0x27d4eb2f)) | 0
    const start = offset + band * this.rows
    const end = start + this.rows
    for (let j = start; j < end; j++) {
      const v = sig[j]!
      h1 = Math.imul(h1 ^ v, 0x01000193)
      h1 ^= h1 >>> 15
      h2 = Math.imul((h2 << 5) | (h2 >>> 27), 0x5bd1e995) ^ v
    }
    h1 = Math.imul(h1 ^ (h1 >>> 16), 0x85ebca6b)
    h1 = Math.imul(h1 ^ (h1 >>> 13), 0xc2b2ae35)
    h1 ^= h1 >>> 16
    h2 = Math.imul(h2 ^ (h2 >>> 16), 0xc2b2ae35)
    h2 = Math.imul(h2 ^ (h2 >>> 13), 0x27d4eb2f)
    h2 ^= h2 >>> 16
    this.k1 = h1 >>> 0
    this.k2 = h2 >>> 0
  }

  /** The first id in bucket (k1, k2), or -1 after making `id` its first member. */
  private claim(id: number): number {
    const t = this.table
    const k1 = this.k1
    const k2 = this.k2
    let i = k1 & this.mask
    for (;;) {
      const at = i * 3
      const v = t[at + 2]!
      if (v === 0) {
        t[at] = k1
        t[at + 1] = k2
        t[at + 2] = id + 1
        if (++this.used * 4 > (this.mask + 1) * 3) this.grow()
        return -1
      }
      if (t[at] === k1 && t[at + 1] === k2) return v - 1
      i = (i + 1) & this.mask
    }
  }

  private grow(): void {
    const old = this.table
    const cap = (this.mask + 1) * 2
    if (cap * 3 > 0xffffffff) {
      throw new DupekitError(
        'INVALID_ARGUMENT',
        `LshIndex: more than ${this.used} buckets; index fewer documents per LshIndex (shard the corpus)`,
      )
    }
    this.table = new Uint32Array(cap * 3)
    this.mask = cap - 1
    const t = this.table
    for (let at = 0; at < old.length; at += 3) {
      if (old[at + 2] === 0) continue
      let i = old[at]! & this.mask
      while (t[i * 3 + 2] !== 0) i = (i + 1) & this.mask
      t[i * 3] = old[at]!
      t[i * 3 + 1] = old[at + 1]!
      t[i * 3 + 2] = old[at + 2]!
    }
  }

  /**
   * Adds document `id` with signature `sig[offset .. offset+numPerm)` and records a
   * candidate pair with the first earlier document of each matching bucket.
   */
  add(id: number, sig: Uint32Array, offset = 0): void {
    if (sig.length < offset + this.numPerm) {
      throw new DupekitError(
        'INVALID_ARGUMENT',
        `LshIndex.add(${id}): signature has ${sig.length - offset} slots ` +
          `from offset ${offset}, need ${this.numPerm}`,
      )
    }
    if (!Number.isInteger(id) || id < 0 || id > 0xfffffffe) {
      throw new DupekitError('INVALID_ARGUMENT', `LshIndex.add: id must be an integer in [0, 2^32-1), got ${id}`)
    }
    const start = this.pairCount
    for (let b = 0; b < this.numBands; b++) {
      this.bandKey(sig, b, offset)
      const first = this.claim(id)
      if (first < 0 || first === id) continue
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
