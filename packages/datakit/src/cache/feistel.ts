/**
 * @module A seeded permutation of [0, n) by a Feistel network with cycle walking: O(1)
 * memory and time per index, the same order on every machine and for any number of
 * workers, so a shuffled epoch is fixed by (seed, n) alone.
 *
 * @example
 * const p = new FeistelPermutation(1000, 42)
 * p.apply(0) // some index in [0, 1000); apply is a bijection
 */
import { DatakitError } from '../errors.js'

const ROUNDS = 6

function mix(x: number, key: number, round: number): number {
  let h = Math.imul(x ^ key, 0x9e3779b1) ^ Math.imul(round + 1, 0x85ebca6b)
  h ^= h >>> 16
  h = Math.imul(h, 0x7feb352d)
  h ^= h >>> 15
  h = Math.imul(h, 0x846ca68b)
  h ^= h >>> 16
  return h >>> 0
}

export class FeistelPermutation {
  private readonly halfBits: number
  private readonly keys: number[]

  /** A permutation of [0, n), fixed by `seed` (an integer). */
  constructor(
    readonly n: number,
    readonly seed: number,
  ) {
    if (!Number.isSafeInteger(n) || n < 1 || n > 2 ** 52)
      throw new DatakitError('INVALID_ARGUMENT', `FeistelPermutation: n must be an integer in [1, 2^52], got ${n}`)
    if (!Number.isSafeInteger(seed))
      throw new DatakitError('INVALID_ARGUMENT', `FeistelPermutation: seed must be an integer, got ${seed}`)
    let bits = 2
    while (2 ** bits < n) bits += 2
    this.halfBits = bits / 2
    this.keys = Array.from({ length: ROUNDS }, (_, r) =>
      mix((seed % 2 ** 32) >>> 0, Math.floor(seed / 2 ** 32) >>> 0, r + 17),
    )
  }

  private encrypt(x: number): number {
    const m = 2 ** this.halfBits
    let l = Math.floor(x / m)
    let r = x % m
    for (let i = 0; i < ROUNDS; i++) {
      // Halves can exceed 32 bits only for n > 2^32; fold them into the round function.
      const f =
        (mix(((r % 2 ** 32) >>> 0) ^ Math.floor(r / 2 ** 32), this.keys[i]!, i) * 2 ** 20 +
          mix(r >>> 0, this.keys[i]! ^ 0x5bd1e995, i)) %
        m
      const nl = r
      r = (l + f) % m
      l = nl
    }
    return l * m + r
  }

  /** The image of `i` (a bijection of [0, n)). */
  apply(i: number): number {
    if (!Number.isInteger(i) || i < 0 || i >= this.n)
      throw new DatakitError('CACHE_INDEX_OUT_OF_RANGE', `permutation index ${i} is outside [0, ${this.n})`)
    let x = i
    // Cycle walking: the network permutes [0, 4^h) ⊇ [0, n); repeat until the value lands in range.
    do x = this.encrypt(x)
    while (x >= this.n)
    return x
  }
}
