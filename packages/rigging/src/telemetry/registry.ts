/**
 * @module The metrics registry: one place that creates each metric once and snapshots all
 * of them as plain data. Asking twice for the same name and type returns the same metric,
 * so modules can declare their metrics where they use them.
 */
import { RiggingError } from '../errors.js'
import { Counter } from './counter.js'
import { Gauge } from './gauge.js'
import { Histogram } from './histogram.js'
import type { HistogramOptions } from './histogram.js'
import type { Metric } from './metric.js'
import type { MetricOptions, MetricSnapshot } from './types.js'
import { toPrometheusText } from './prometheus.js'

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/

/** Every metric of a registry at one moment. */
export type RegistrySnapshot = { readonly time: string; readonly metrics: readonly MetricSnapshot[] }

/**
 * A set of metrics.
 * @example
 * const reg = new MetricsRegistry()
 * const steps = reg.counter('levanter_steps_total', { help: 'optimizer steps', labelNames: ['run'] })
 * steps.inc(1, { run: 'tiny' })
 * reg.histogram('ducky_call_seconds', { help: 'RPC latency' }).observe(0.012)
 * reg.snapshot(); reg.toPrometheus()
 */
export class MetricsRegistry {
  private readonly metrics = new Map<string, Metric>()

  counter(name: string, opts: MetricOptions): Counter {
    return this.getOrCreate(name, 'counter', opts, () => new Counter(name, opts))
  }

  gauge(name: string, opts: MetricOptions): Gauge {
    return this.getOrCreate(name, 'gauge', opts, () => new Gauge(name, opts))
  }

  histogram(name: string, opts: HistogramOptions): Histogram {
    return this.getOrCreate(name, 'histogram', opts, () => new Histogram(name, opts))
  }

  /** The metric called `name`, if any. */
  get(name: string): Metric | undefined {
    return this.metrics.get(name)
  }

  /** Every metric as plain data, in creation order, stamped with the time (ISO 8601). */
  snapshot(): RegistrySnapshot {
    return { time: new Date().toISOString(), metrics: [...this.metrics.values()].map((m) => m.snapshot()) }
  }

  /** The Prometheus text exposition (format 0.0.4) of a fresh snapshot. */
  toPrometheus(): string {
    return toPrometheusText(this.snapshot().metrics)
  }

  private getOrCreate<M extends Metric>(name: string, type: M['type'], opts: MetricOptions, make: () => M): M {
    if (!METRIC_NAME.test(name)) {
      throw new RiggingError(
        'TELEMETRY_INVALID',
        `metric name "${name}" is not valid; use letters, digits, "_" ` +
          `and ":", not starting with a digit (e.g. iris_jobs_total)`,
      )
    }
    const existing = this.metrics.get(name)
    if (existing === undefined) {
      const created = make()
      this.metrics.set(name, created)
      return created
    }
    const labels = [...(opts.labelNames ?? [])].sort().join(',')
    if (existing.type !== type || existing.labelNames.join(',') !== labels) {
      throw new RiggingError(
        'TELEMETRY_INVALID',
        `metric ${name} already exists as a ${existing.type} with labels ` +
          `[${existing.labelNames.join(', ')}]; use another name or the ` +
          `same definition`,
      )
    }
    return existing as M
  }
}

let defaultRegistry: MetricsRegistry | undefined

/** The process-wide registry that packages record into unless given another. */
export function metrics(): MetricsRegistry {
  defaultRegistry ??= new MetricsRegistry()
  return defaultRegistry
}
