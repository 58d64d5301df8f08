/** @module Seeded, serializable random numbers (splitmix32): init, batch order and sampling all derive from one seed.
 * */

/** 32-bit mix of a string or numbers into a seed, so `seedFor(seed, 'name')` is stable across runs. */
export function seedFor(...parts: readonly (number | string)[]): number {
  let h = 0x811c9dc5
  for (const p of parts) {
    const s = String(p)
    for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193)
    h = Math.imul(h ^ 0x2f, 0x01000193)
  }
  return h >>> 0
}

/** A small PRNG whose whole state is one uint32 (`state`), so it is checkpointed exactly. */
export class Rng {
  constructor(public state: number) {
    this.state = state >>> 0
  }
  /** Uniform in [0, 1). */
  next(): number {
    this.state = (this.state + 0x9e3779b9) >>> 0
    let z = this.state
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b)
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35)
    return ((z ^ (z >>> 16)) >>> 0) / 4294967296
  }
  /** Standard normal (Box–Muller). */
  normal(): number {
    const u = 1 - this.next(),
      v = this.next()
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v)
  }
  /** Integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.next() * n)
  }
}

/** Float32Array of `n` draws from N(0, std²). */
export function normalArray(n: number, std: number, seed: number): Float32Array {
  const r = new Rng(seed),
    out = new Float32Array(n)
  for (let i = 0; i < n; i++) out[i] = r.normal() * std
  return out
}

/**
 * Draws `from`…`to` of `normalArray(n, std, seed)` (for any n ≥ to) without the ones before them:
 * the generator's state is a counter, so draw i starts from the state after 2·i steps. The same
 * bits as the slice of the whole array.
 */
export function normalRange(from: number, to: number, std: number, seed: number): Float32Array {
  const r = new Rng((seed + Math.imul(2 * from, 0x9e3779b9)) >>> 0),
    out = new Float32Array(to - from)
  for (let i = 0; i < out.length; i++) out[i] = r.normal() * std
  return out
}

/** Fisher–Yates permutation of 0…n-1 from a seed. */
export function permutation(n: number, seed: number): Uint32Array {
  const r = new Rng(seed),
    p = new Uint32Array(n)
  for (let i = 0; i < n; i++) p[i] = i
  for (let i = n - 1; i > 0; i--) {
    const j = r.int(i + 1),
      t = p[i]!
    p[i] = p[j]!
    p[j] = t
  }
  return p
}
