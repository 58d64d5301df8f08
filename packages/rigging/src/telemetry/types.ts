/** @module The plain-data shapes of metrics: labels, options and snapshots. */

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

export type CounterSnapshot = {
  readonly type: 'counter'
  readonly name: string
  readonly help: string
  readonly samples: readonly ScalarSample[]
}
export type GaugeSnapshot = {
  readonly type: 'gauge'
  readonly name: string
  readonly help: string
  readonly samples: readonly ScalarSample[]
}
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

export type MetricOptions = {
  /** One line saying what is measured (and in which unit). */
  help: string
  /** The label names every observation must give, exactly. @default [] */
  labelNames?: readonly string[]
}
