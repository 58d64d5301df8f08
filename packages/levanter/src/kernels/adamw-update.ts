/**
 * @module AdamW's update and the gradient's squared norm over plain float32 arrays: the JS kernels
 * that the native addon (native/*.cc, `NativeOps.adamw` and `sumSquares`) repeats bit for bit: the
 * host implementation of the AdamW op (optim/adamw-op.ts), which every host optimizer runs.
 */

/** Σ g², in two interleaved float64 sums (shards of a gradient add up to the global norm). */
export function sumSquares(g: Float32Array): number {
  let s0 = 0,
    s1 = 0
  const n = g.length,
    even = n - (n % 2)
  for (let i = 0; i < even; i += 2) {
    s0 += g[i]! * g[i]!
    s1 += g[i + 1]! * g[i + 1]!
  }
  if (even < n) s0 += g[even]! * g[even]!
  return s0 + s1
}

/** One AdamW step over one parameter's arrays (a small top-level function: the JIT compiles the hot loop on its own).
 * */
export function adamwUpdate(
  g: Float32Array,
  m: Float32Array,
  v: Float32Array,
  p: Float32Array,
  out: Float32Array,
  scale: number,
  b1: number,
  c1: number,
  b2: number,
  c2: number,
  keep: number,
  step: number,
  rbc2: number,
  eps: number,
): void {
  for (let i = 0; i < out.length; i++) {
    const gi = g[i]! * scale
    const mi = (m[i] = b1 * m[i]! + c1 * gi)
    const vi = (v[i] = b2 * v[i]! + c2 * gi * gi)
    out[i] = p[i]! * keep - (step * mi) / (Math.sqrt(vi * rbc2) + eps)
  }
}
