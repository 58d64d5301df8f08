/**
 * @module Bloom filter: set membership with no false negatives and a chosen false-positive rate.
 *
 * Sized from the expected number of items `n` and false-positive rate `p`:
 * `bits = ceil(-n ln p / (ln 2)^2)` (rounded up to whole 64-bit words) and
 * `hashes = round(bits / n · ln 2)`. A key is hashed once with XXH3-64 (strings as
 * UTF-8); probe `i` sets bit `(h1 + i·h2) mod bits` where `h1`, `h2` are the low and
 * high 32 bits of the hash (double hashing). The bit layout and hashing are part of
 * the saved format (`bloom-file.ts`), so a filter saved anywhere loads anywhere.
 *
 * @example
 * const bf = BloomFilter.create({ expectedItems: 1e6, falsePositiveRate: 0.01 })
 * bf.add('doc-1'); bf.has('doc-1') // true
 */
import { DupekitError } from './errors.js'
import type { HashInput } from './hash.js'
import { kernels } from './internal/wasm.js'

export type BloomOptions = {
  /** Items the filter is sized for. */
  expectedItems: number
  /** Target false-positive rate once `expectedItems` are in, in (0, 1). @default 0.01 */
  falsePositiveRate?: number
  /** Hash seed; filters combine only with filters of the same seed. @default 0 */
  seed?: number
}

/** Largest filter: 2^32 bits (512 MiB), enough for ~450 million items at 1%. */
export const BLOOM_MAX_BITS = 2 ** 32

/** Bits and hash count for `n` items at false-positive rate `p`. */
export function bloomSize(expectedItems: number, falsePositiveRate = 0.01): { bits: number; hashes: number } {
  if (!(expectedItems >= 1) || !Number.isFinite(expectedItems)) {
    throw new DupekitError('INVALID_ARGUMENT', `Bloom filter: expectedItems must be a number ≥ 1, got ${expectedItems}`)
  }
  if (!(falsePositiveRate > 0 && falsePositiveRate < 1)) {
    throw new DupekitError(
      'INVALID_ARGUMENT',
      `Bloom filter: falsePositiveRate must be in (0, 1), got ${falsePositiveRate}; e.g. 0.01`,
    )
  }
  const raw = Math.ceil((-expectedItems * Math.log(falsePositiveRate)) / (Math.LN2 * Math.LN2))
  const bits = Math.ceil(raw / 64) * 64
  if (bits > BLOOM_MAX_BITS) {
    throw new DupekitError(
      'INVALID_ARGUMENT',
      `Bloom filter: ${expectedItems} items at rate ` +
        `${falsePositiveRate} need ${bits} bits, over the ` +
        `${BLOOM_MAX_BITS}-bit limit; shard the keys over several filters`,
    )
  }
  const hashes = Math.min(64, Math.max(1, Math.round((bits / expectedItems) * Math.LN2)))
  return { bits, hashes }
}

const encoder = new TextEncoder()
let stage: Uint8Array | undefined

export class BloomFilter {
  /** Number of bits, a multiple of 64. */
  readonly bits: number
  /** Probes per key. */
  readonly hashes: number
  readonly seed: number
  /** The bit array; bit `i` is `(words[i >>> 5] >>> (i & 31)) & 1`. */
  readonly words: Uint32Array
  /** Keys whose add() set at least one new bit. */
  added: number

  /**
   * `new BloomFilter({ expectedItems, falsePositiveRate })` sizes a filter as `create` does;
   * `new BloomFilter(bits, hashes, seed?, words?, added?)` takes the exact shape (what `load` uses).
   */
  constructor(options: BloomOptions)
  constructor(bits: number, hashes: number, seed?: number, words?: Uint32Array, added?: number)
  constructor(shape: number | BloomOptions, hashesArg?: number, seed = 0, words?: Uint32Array, added = 0) {
    let bits: number
    let hashes: number
    if (typeof shape === 'object' && shape !== null) {
      ;({ bits, hashes } = bloomSize(shape.expectedItems, shape.falsePositiveRate ?? 0.01))
      seed = shape.seed ?? 0
    } else {
      bits = shape
      hashes = hashesArg as number
    }
    if (!Number.isInteger(bits) || bits < 64 || bits % 64 !== 0 || bits > BLOOM_MAX_BITS) {
      throw new DupekitError(
        'INVALID_ARGUMENT',
        `Bloom filter: bits must be a multiple of 64 in [64, 2^32], got ${bits}`,
      )
    }
    if (!Number.isInteger(hashes) || hashes < 1 || hashes > 64) {
      throw new DupekitError('INVALID_ARGUMENT', `Bloom filter: hashes must be an integer in [1, 64], got ${hashes}`)
    }
    if (!Number.isInteger(seed) || seed < 0 || seed > 0xffffffff) {
      throw new DupekitError('INVALID_ARGUMENT', `Bloom filter: seed must be an integer in [0, 2^32), got ${seed}`)
    }
    if (words !== undefined && words.length !== bits / 32) {
      throw new DupekitError(
        'INVALID_ARGUMENT',
        `Bloom filter: ${bits} bits need ${bits / 32} words, got ${words.length}`,
      )
    }
    this.bits = bits
    this.hashes = hashes
    this.seed = seed
    this.words = words ?? new Uint32Array(bits / 32)
    this.added = added
  }

  /** A filter sized for `expectedItems` at `falsePositiveRate`. */
  static create(options: BloomOptions): BloomFilter {
    return new BloomFilter(options)
  }

  /** Hashes `key`; returns the u32 index in kernel memory of h1 (h2 follows). */
  private hashKey(key: HashInput): number {
    const m = kernels()
    const out = m.scratch()
    const data = out + 16
    const need = typeof key === 'string' ? key.length * 3 : key.length
    // One staging view, remade only when memory grows: a subarray per key would allocate.
    if (stage === undefined || stage.buffer !== m.buffer || stage.byteOffset !== data || stage.length < need) {
      m.ensure(data + Math.max(need, 4096))
      stage = new Uint8Array(m.buffer, data)
    }
    let len: number
    if (typeof key === 'string') {
      len = encoder.encodeInto(key, stage).written
    } else {
      stage.set(key)
      len = key.length
    }
    m.k.xxh3To(data, len, this.seed, 0, out)
    return out >>> 2
  }

  /** Adds `key`; returns true if the key was (certainly) not in the filter before. */
  add(key: HashInput): boolean {
    const at = this.hashKey(key)
    const u = kernels().u32
    const h1 = u[at]!
    const h2 = u[at + 1]!
    const w = this.words
    const m = this.bits
    let fresh = false
    // bit_i = (h1 + i·h2) mod m, stepped without a division per probe.
    let bit = h1 % m
    const step = h2 % m
    for (let i = 0; i < this.hashes; i++) {
      if (i > 0) {
        bit += step
        if (bit >= m) bit -= m
      }
      const word = bit >>> 5
      const mask = 1 << (bit & 31)
      if ((w[word]! & mask) === 0) {
        w[word] = w[word]! | mask
        fresh = true
      }
    }
    if (fresh) this.added++
    return fresh
  }

  /** True if `key` may have been added (false positives at about the target rate), false if certainly not. */
  has(key: HashInput): boolean {
    const at = this.hashKey(key)
    const u = kernels().u32
    const h1 = u[at]!
    const h2 = u[at + 1]!
    const w = this.words
    const m = this.bits
    let bit = h1 % m
    const step = h2 % m
    for (let i = 0; i < this.hashes; i++) {
      if (i > 0) {
        bit += step
        if (bit >= m) bit -= m
      }
      if ((w[bit >>> 5]! & (1 << (bit & 31))) === 0) return false
    }
    return true
  }

  /** Number of bits set. */
  bitCount(): number {
    let c = 0
    const w = this.words
    for (let i = 0; i < w.length; i++) {
      let v = w[i]!
      v = v - ((v >>> 1) & 0x55555555)
      v = (v & 0x33333333) + ((v >>> 2) & 0x33333333)
      c += Math.imul((v + (v >>> 4)) & 0x0f0f0f0f, 0x01010101) >>> 24
    }
    return c
  }

  /** Estimated number of distinct keys added: `-(bits/hashes) · ln(1 - set/bits)`. */
  estimatedCount(): number {
    const set = this.bitCount()
    if (set === this.bits) return Infinity
    return (-this.bits / this.hashes) * Math.log(1 - set / this.bits)
  }

  private checkCompatible(other: BloomFilter, op: string): void {
    if (other.bits !== this.bits || other.hashes !== this.hashes || other.seed !== this.seed) {
      throw new DupekitError(
        'BLOOM_MISMATCH',
        `Bloom ${op}: filters differ (bits ${this.bits} vs ${other.bits}` +
          `, hashes ${this.hashes} vs ${other.hashes}, seed ${this.seed} ` +
          `vs ${other.seed}); create both with the same options`,
      )
    }
  }

  /** A new filter holding the keys of either filter (bitwise OR). */
  union(other: BloomFilter): BloomFilter {
    this.checkCompatible(other, 'union')
    const w = new Uint32Array(this.words.length)
    for (let i = 0; i < w.length; i++) w[i] = this.words[i]! | other.words[i]!
    const out = new BloomFilter(this.bits, this.hashes, this.seed, w)
    out.added = Math.round(out.estimatedCount())
    return out
  }

  /**
   * A new filter that answers true for every key in both filters (bitwise AND). Its
   * false-positive rate is at most that of the fuller input.
   */
  intersection(other: BloomFilter): BloomFilter {
    this.checkCompatible(other, 'intersection')
    const w = new Uint32Array(this.words.length)
    for (let i = 0; i < w.length; i++) w[i] = this.words[i]! & other.words[i]!
    const out = new BloomFilter(this.bits, this.hashes, this.seed, w)
    out.added = Math.round(out.estimatedCount())
    return out
  }
}
