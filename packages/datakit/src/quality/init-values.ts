/**
 * @module The initial input vectors: uniform in [-1/dim, 1/dim] as fastText draws them, but from a
 * counter-based generator, so that any row can be drawn again from (seed, row) alone. A model file
 * then stores only the rows training changed; the others are drawn again when they are read.
 */

/** The initial value of element `index` of the input matrix, uniform in [-scale, scale). */
function initValue(seed: number, index: number, scale: number): number {
  // a 32-bit mix of (seed, index): two rounds of multiply-xorshift (lowbias32)
  let x = (index ^ Math.imul(seed, 0x9e3779b9)) >>> 0
  x = Math.imul(x ^ (x >>> 16), 0x7feb352d)
  x = Math.imul(x ^ (x >>> 15), 0x846ca68b)
  x ^= x >>> 16
  return ((x >>> 0) / 4294967296) * 2 * scale - scale
}

/**
 * Writes the initial values of row `row` of a `dim`-wide input matrix into `out` from `at`. Element
 * `(row, j)` is index `row * dim + j`, wrapped at 2^32 (which only repeats values).
 */
export function drawRow(seed: number, row: number, dim: number, out: Float32Array, at: number): void {
  const scale = 1 / dim
  const off = row * dim
  for (let j = 0; j < dim; j++) out[at + j] = initValue(seed, (off + j) >>> 0, scale)
}
