/** @module Flat buffers of gradients and parameters as mesh members send them: joined, and viewed in parts. */

/** The arrays one after another in one new array. */
export function concat(parts: readonly Float32Array[]): Float32Array {
  const out = new Float32Array(parts.reduce((a, p) => a + p.length, 0))
  let o = 0
  for (const p of parts) {
    out.set(p, o)
    o += p.length
  }
  return out
}

/** Consecutive views of `flat`, `len(item)` floats each. */
export function split<T>(flat: Float32Array, items: readonly T[], len: (t: T) => number): Float32Array[] {
  let o = 0
  return items.map((t) => {
    const v = flat.subarray(o, o + len(t))
    o += len(t)
    return v
  })
}
