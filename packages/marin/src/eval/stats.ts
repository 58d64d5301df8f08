/** @module Aggregate statistics of evaluation metrics, as lm-eval-harness computes them. */

/** Arithmetic mean (0 for no values). */
export function mean(xs: readonly number[]): number {
  return xs.length === 0 ? 0 : xs.reduce((a, b) => a + b, 0) / xs.length
}

/** Standard error of the mean: sample standard deviation (n − 1) over √n; 0 below two values. */
export function meanStderr(xs: readonly number[]): number {
  const n = xs.length
  if (n < 2) return 0
  const m = mean(xs)
  const variance = xs.reduce((a, x) => a + (x - m) ** 2, 0) / (n - 1)
  return Math.sqrt(variance / n)
}

/**
 * A corpus-level ratio Σnum / Σden (bits per byte over all documents) with the
 * standard error of a ratio estimator (linearization), since documents differ in length.
 */
export function ratioWithStderr(num: readonly number[], den: readonly number[]): { value: number; stderr: number } {
  const n = num.length
  const sNum = num.reduce((a, b) => a + b, 0),
    sDen = den.reduce((a, b) => a + b, 0)
  if (n === 0 || sDen === 0) return { value: 0, stderr: 0 }
  const r = sNum / sDen
  if (n < 2) return { value: r, stderr: 0 }
  const meanDen = sDen / n
  const resid = num.reduce((a, x, i) => a + (x - r * den[i]!) ** 2, 0) / (n - 1)
  return { value: r, stderr: Math.sqrt(resid / n) / meanDen }
}

/** UTF-8 byte length of a string. */
export function utf8Length(s: string): number {
  return Buffer.byteLength(s, 'utf8')
}
