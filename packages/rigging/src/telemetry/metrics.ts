/**
 * @module Counters, gauges and histograms, each a family of series told apart by labels.
 * Snapshots are plain data: the registry, the JSONL sink and the Prometheus exposition
 * all read the same snapshot.
 */
import { RiggingError } from '../errors.js'
import { DEFAULT_QUANTILES, Reservoir, quantileKey } from './reservoir.js'

/** Label values by label name; numbers and booleans are written as text. */
export type Labels = Readonly<Record<string, string | number | boolean>>

export type MetricType = 'counter' | 'gauge' | 'histogram'

export type ScalarSample = { readonly labels: Readonly<Record<string, string>>; readonly value: number }
export type HistogramSample = {
  readonly labels: Readonly<Record<string, string>>
  readonly count: number
  readonly sum: number
  readonly min: number | null
  readonly max: number | null
  /** Cumulative counts: `buckets[i]` observations were ≤ the family's `buckets[i]` bound. */
  readonly buckets: readonly number[]
  /** `p50`, `p90`, `p99`, ...: `null` before the first observation. */
  readonly quantiles: Readonly<Record<string, number | null>>
  /** Whether the quantiles are exact or estimated from the bounded reservoir. */
  readonly exactQuantiles: boolean
}

export type CounterSnapshot = { readonly type: 'counter'; readonly name: string; readonly help: string; readonly samples: readonly ScalarSample[] }
export type GaugeSnapshot = { readonly type: 'gauge'; readonly name: string; readonly help: string; readonly samples: readonly ScalarSample[] }
export type HistogramSnapshot = {
  readonly type: 'histogram'
  readonly name: string
  readonly help: string
  /** Upper bounds of the buckets, ascending, without +Inf. */
  readonly buckets: readonly number[]
  readonly quantiles: readonly number[]
  /** How Prometheus sees it: buckets (`histogram`) or quantiles (`summary`). */
  readonly exposition: 'histogram' | 'summary'
  readonly samples: readonly HistogramSample[]
}
export type MetricSnapshot = CounterSnapshot | GaugeSnapshot | HistogramSnapshot

const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/

export type MetricOptions = {
  /** One line saying what is measured (and in which unit). */
  help: string
  /** The label names every observation must give, exactly. @default [] */
  labelNames?: readonly string[]
}

/** What counters, gauges and histograms share: validated labels and one series per label set. */
abstract class Family<S> {
  readonly help: string
  readonly labelNames: readonly string[]
  protected readonly series = new Map<string, { labels: Record<string, string>; state: S }>()

  constructor(
    readonly name: string,
    opts: MetricOptions,
    reserved: readonly string[] = [],
  ) {
    this.help = opts.help
    this.labelNames = [...(opts.labelNames ?? [])].sort()
    for (const l of this.labelNames) {
      if (!LABEL_NAME.test(l) || l.startsWith('__') || reserved.includes(l)) {
        throw new RiggingError('TELEMETRY_INVALID', `metric ${name}: label name "${l}" is not allowed; use letters, digits and "_" (not starting with "__"${reserved.length ? `, not ${reserved.join(', ')}` : ''})`)
      }
    }
  }

  protected abstract init(): S

  protected state(labels: Labels | undefined): S
  protected state(labels: Labels | undefined, create: false): S | undefined
  protected state(labels: Labels | undefined, create = true): S | undefined {
    // Hot path: read the declared names in their (sorted) order; no per-call sort.
    const names = this.labelNames
    const given = labels === undefined ? 0 : Object.keys(labels).length
    let id = ''
    let ok = given === names.length
    for (let i = 0; ok && i < names.length; i++) {
      const v = labels![names[i]!]
      if (v === undefined) ok = false
      else id += (i === 0 ? '' : '\u0000') + String(v)
    }
    if (!ok) {
      const keys = labels === undefined ? [] : Object.keys(labels).sort()
      throw new RiggingError('TELEMETRY_INVALID', `metric ${this.name}: got labels [${keys.join(', ')}], but it was declared with [${names.join(', ')}]; pass exactly those`)
    }
    let entry = this.series.get(id)
    if (entry === undefined && !create) return undefined
    if (entry === undefined) {
      const text: Record<string, string> = {}
      for (const k of names) text[k] = String(labels![k])
      entry = { labels: text, state: this.init() }
      this.series.set(id, entry)
    }
    return entry.state
  }

  protected checkValue(value: number, what: string): void {
    if (!Number.isFinite(value)) throw new RiggingError('TELEMETRY_INVALID', `metric ${this.name}: ${what} ${value} is not a finite number`)
  }
}

/** A value that only goes up (requests served, bytes read). Name it `…_total`. */
export class Counter extends Family<{ value: number }> {
  readonly type = 'counter'
  protected init() {
    return { value: 0 }
  }
  /** Adds `by` (≥ 0) to the series of `labels`. @default by 1 */
  inc(by = 1, labels?: Labels): void {
    this.checkValue(by, 'increment')
    if (by < 0) throw new RiggingError('TELEMETRY_INVALID', `metric ${this.name}: a counter cannot decrease (got ${by}); use a gauge`)
    this.state(labels).value += by
  }
  /** The current value; 0 for a label set never seen (without creating its series). */
  value(labels?: Labels): number {
    return this.state(labels, false)?.value ?? 0
  }
  snapshot(): CounterSnapshot {
    return { type: 'counter', name: this.name, help: this.help, samples: [...this.series.values()].map((s) => ({ labels: s.labels, value: s.state.value })) }
  }
}

/** A value that goes up and down (queue length, memory in use). */
export class Gauge extends Family<{ value: number }> {
  readonly type = 'gauge'
  protected init() {
    return { value: 0 }
  }
  set(value: number, labels?: Labels): void {
    this.checkValue(value, 'value')
    this.state(labels).value = value
  }
  inc(by = 1, labels?: Labels): void {
    this.checkValue(by, 'increment')
    this.state(labels).value += by
  }
  dec(by = 1, labels?: Labels): void {
    this.inc(-by, labels)
  }
  /** The current value; 0 for a label set never seen (without creating its series). */
  value(labels?: Labels): number {
    return this.state(labels, false)?.value ?? 0
  }
  snapshot(): GaugeSnapshot {
    return { type: 'gauge', name: this.name, help: this.help, samples: [...this.series.values()].map((s) => ({ labels: s.labels, value: s.state.value })) }
  }
}

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
      throw new RiggingError('TELEMETRY_INVALID', `metric ${name}: buckets [${b.join(', ')}] must be finite and strictly ascending (+Inf is added for you)`)
    }
    if (this.quantiles.some((q) => !(q >= 0 && q <= 1))) {
      throw new RiggingError('TELEMETRY_INVALID', `metric ${name}: quantiles [${this.quantiles.join(', ')}] must be between 0 and 1`)
    }
    if (!Number.isInteger(this.reservoirSize) || this.reservoirSize < 1) {
      throw new RiggingError('TELEMETRY_INVALID', `metric ${name}: reservoirSize ${this.reservoirSize} must be a positive integer`)
    }
  }

  protected init(): HistogramState {
    return { counts: new Array<number>(this.buckets.length).fill(0), count: 0, sum: 0, min: Infinity, max: -Infinity, reservoir: new Reservoir(this.reservoirSize) }
  }

  observe(value: number, labels?: Labels): void {
    this.checkValue(value, 'observation')
    const s = this.state(labels)
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
    return { type: 'histogram', name: this.name, help: this.help, buckets: this.buckets, quantiles: this.quantiles, exposition: this.exposition, samples }
  }
}

export type Metric = Counter | Gauge | Histogram
