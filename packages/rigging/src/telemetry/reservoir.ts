/**
 * @module A bounded sample of observed values for quantiles.
 *
 * Quantiles are exact while a histogram has seen at most `capacity` values. Past that the
 * reservoir keeps a uniform random sample of everything seen (Vitter's algorithm R), and
 * quantiles are estimates whose error shrinks as 1/sqrt(capacity): with the default 2048,
 * the p50 of a uniform stream is typically within about 1% of the range.
 */

/** Quantiles reported by default. */
export const DEFAULT_QUANTILES = [0.5, 0.9, 0.99] as const

/** The key a quantile has in snapshots: 0.5 → `p50`, 0.999 → `p99.9`. */
export function quantileKey(q: number): string {
  return `p${Number((q * 100).toFixed(4))}`
}

export class Reservoir {
  private readonly values: number[] = []
  private seen = 0
  private state: number

  constructor(
    readonly capacity = 2048,
    seed = 0x9e3779b9,
  ) {
    // A seeded generator keeps estimates reproducible from run to run.
    this.state = seed >>> 0 || 1
  }

  add(value: number): void {
    this.seen++
    if (this.values.length < this.capacity) {
      this.values.push(value)
      return
    }
    const j = Math.floor(this.random() * this.seen)
    if (j < this.capacity) this.values[j] = value
  }

  /** Whether the quantiles are exact (every value seen is held). */
  get exact(): boolean {
    return this.seen <= this.capacity
  }

  /**
   * Quantiles by linear interpolation between order statistics (the "R-7" definition
   * used by NumPy and R): q=0 is the minimum, q=1 the maximum. `null` when empty.
   */
  quantiles(qs: readonly number[]): (number | null)[] {
    if (this.values.length === 0) return qs.map(() => null)
    const sorted = Float64Array.from(this.values).sort()
    return qs.map((q) => {
      const h = (sorted.length - 1) * q
      const lo = Math.floor(h)
      const a = sorted[lo]!
      const b = sorted[Math.min(lo + 1, sorted.length - 1)]!
      return a + (h - lo) * (b - a)
    })
  }

  // xorshift32: fast, and good enough to choose which slot to replace.
  private random(): number {
    let x = this.state
    x ^= x << 13
    x ^= x >>> 17
    x ^= x << 5
    this.state = x >>> 0
    return this.state / 0x1_0000_0000
  }
}
