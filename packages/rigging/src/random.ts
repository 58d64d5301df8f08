/**
 * @module Seeded random numbers for what must come out the same on every machine and in every
 * process (test data made on both sides of a process boundary, evaluation items drawn from a
 * corpus): mulberry32, a 32-bit state generator. Not for cryptography.
 */

/**
 * A generator of uniform numbers in [0, 1), the same sequence for the same seed everywhere.
 * @example const rnd = seededRandom(7); rnd() // 0.…, then the next, …
 */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}
