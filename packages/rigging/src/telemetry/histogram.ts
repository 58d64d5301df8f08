/** @module Histograms: the distribution of a value as buckets, sum, count, min, max and quantiles. */
import { RiggingError } from '../errors.js'
import { Family } from './family.js'
import { DEFAULT_QUANTILES, Reservoir, quantileKey } from './reservoir.js'
import type { HistogramSnapshot, Labels, MetricOptions } from './types.js'

/** One series of a histogram with its labels fixed. */
export type BoundHistogram = { observe(value: number): void }

/** Prometheus' default buckets, in seconds: right for latencies of calls and steps. */
export const DEFAULT_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10] as const

export type HistogramOptions = MetricOptions & {
  /** Upper bounds, ascending. @default DEFAULT_BUCKETS */
  buckets?: readonly number[]
  /** Quantiles in snapshots. @default [0.5, 0.9, 0.99] */
  quantiles?: readonly number[]
  /** Values kept per series for quantiles; exact up to this many. @default 2048 */
  reservoirSize?: number
  /** Prometheus type: `histogram` (buckets) or `summary` (quantiles). @default 'histogram' */
  exposition?: 'histogram' | 'summary'
}

type HistogramState = { counts: number[]; count: number; sum: number; min: number; max: number; reservoir: Reservoir }

/** The distribution of a value (latency, batch size): buckets, sum, count, min, max and quantiles. */
export class Histogram extends Family<HistogramState> {
  readonly type = 'histogram'
  readonly buckets: readonly number[]
  readonly quantiles: readonly number[]
  readonly exposition: 'histogram' | 'summary'
  private readonly reservoirSize: number

  constructor(name: string, opts: HistogramOptions) {
    super(name, opts, ['le', 'quantile'])
    this.buckets = [...(opts.buckets ?? DEFAULT_BUCKETS)]
    this.quantiles = [...(opts.quantiles ?? DEFAULT_QUANTILES)]
    this.exposition = opts.exposition ?? 'histogram'
    this.reservoirSize = opts.reservoirSize ?? 2048
    const b = this.buckets
    if (b.some((x, i) => !Number.isFinite(x) || (i > 0 && x <= b[i - 1]!))) {
      throw new RiggingError(
        'TELEMETRY_INVALID',
        `metric ${name}: buckets [${b.join(', ')}] must be finite and strictly ascending (+Inf is added for you)`,
      )
    }
    if (this.quantiles.some((q) => !(q >= 0 && q <= 1))) {
      throw new RiggingError(
        'TELEMETRY_INVALID',
        `metric ${name}: quantiles [${this.quantiles.join(', ')}] must be between 0 and 1`,
      )
    }
    if (!Number.isInteger(this.reservoirSize) || this.reservoirSize < 1) {
      throw new RiggingError(
        'TELEMETRY_INVALID',
        `metric ${name}: reservoirSize ${this.reservoirSize} must be a positive integer`,
      )
    }
  }

  protected init(): HistogramState {
    return {
      counts: new Array<number>(this.buckets.length).fill(0),
      count: 0,
      sum: 0,
      min: Infinity,
      max: -Infinity,
      reservoir: new Reservoir(this.reservoirSize),
    }
  }

  observe(value: number, labels?: Labels): void {
    this.checkValue(value, 'observation')
    this.record(this.state(labels), value)
  }

  /**
   * The series of `labels`, bound: labels are checked once, not on every call.
   * @example const get = calls.with({ method: 'Get' }); get.observe(0.012)
   */
  with(labels: Labels): BoundHistogram {
    const s = this.state(labels)
    return {
      observe: (value) => {
        this.checkValue(value, 'observation')
        this.record(s, value)
      },
    }
  }

  private record(s: HistogramState, value: number): void {
    // Binary search for the first bound ≥ value; values above every bound only count in +Inf.
    let lo = 0
    let hi = this.buckets.length
    while (lo < hi) {
      const mid = (lo + hi) >> 1
      if (value <= this.buckets[mid]!) hi = mid
      else lo = mid + 1
    }
    if (lo < s.counts.length) s.counts[lo]!++
    s.count++
    s.sum += value
    if (value < s.min) s.min = value
    if (value > s.max) s.max = value
    s.reservoir.add(value)
  }

  /** Observes the seconds `fn` takes (also when it throws) and returns its result. */
  async time<T>(fn: () => Promise<T> | T, labels?: Labels): Promise<T> {
    const t0 = process.hrtime.bigint()
    try {
      return await fn()
    } finally {
      this.observe(Number(process.hrtime.bigint() - t0) / 1e9, labels)
    }
  }

  snapshot(): HistogramSnapshot {
    const samples = [...this.series.values()].map(({ labels, state: s }) => {
      let running = 0
      const qs = s.reservoir.quantiles(this.quantiles)
      return {
        labels,
        count: s.count,
        sum: s.sum,
        min: s.count === 0 ? null : s.min,
        max: s.count === 0 ? null : s.max,
        buckets: s.counts.map((c) => (running += c)),
        quantiles: Object.fromEntries(this.quantiles.map((q, i) => [quantileKey(q), qs[i] ?? null])),
        exactQuantiles: s.reservoir.exact,
      }
    })
    return {
      type: 'histogram',
      name: this.name,
      help: this.help,
      buckets: this.buckets,
      quantiles: this.quantiles,
      exposition: this.exposition,
      samples,
    }
  }
}
