/** @module The union of metric kinds a registry holds. */
import type { Counter } from './counter.js'
import type { Gauge } from './gauge.js'
import type { Histogram } from './histogram.js'

export type Metric = Counter | Gauge | Histogram
