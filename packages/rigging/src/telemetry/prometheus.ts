/**
 * @module The Prometheus text exposition format (version 0.0.4): `# HELP` and `# TYPE` once
 * per family, then its samples; histograms as cumulative `_bucket{le=…}` series ending in
 * `+Inf`, plus `_sum` and `_count`; summaries as `{quantile=…}` series plus `_sum` and `_count`.
 */
import type { MetricSnapshot } from './types.js'
import { quantileKey } from './reservoir.js'

/** The content type to serve the exposition with. */
export const PROMETHEUS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8'

/** A number as Prometheus writes it: `+Inf`, `-Inf`, `NaN` or a float. */
export function formatPromValue(v: number | null): string {
  if (v === null || Number.isNaN(v)) return 'NaN'
  if (v === Infinity) return '+Inf'
  if (v === -Infinity) return '-Inf'
  return String(v)
}

/** Label values escape backslash, double quote and newline. */
export function escapeLabelValue(v: string): string {
  return v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')
}

/** HELP text escapes backslash and newline (quotes stay as they are). */
export function escapeHelp(v: string): string {
  return v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n')
}

function labelText(labels: Readonly<Record<string, string>>, extra?: [string, string]): string {
  const pairs = Object.entries(labels).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
  if (extra !== undefined) pairs.push(extra)
  return pairs.length === 0 ? '' : `{${pairs.map(([k, v]) => `${k}="${escapeLabelValue(v)}"`).join(',')}}`
}

/** The exposition of some metric snapshots; ends with a newline. */
export function toPrometheusText(metrics: readonly MetricSnapshot[]): string {
  const out: string[] = []
  for (const m of metrics) {
    const promType = m.type === 'histogram' ? m.exposition : m.type
    out.push(`# HELP ${m.name} ${escapeHelp(m.help)}`, `# TYPE ${m.name} ${promType}`)
    if (m.type !== 'histogram') {
      for (const s of m.samples) out.push(`${m.name}${labelText(s.labels)} ${formatPromValue(s.value)}`)
      continue
    }
    for (const s of m.samples) {
      if (m.exposition === 'histogram') {
        m.buckets.forEach((le, i) =>
          out.push(`${m.name}_bucket${labelText(s.labels, ['le', formatPromValue(le)])} ${s.buckets[i] ?? 0}`),
        )
        out.push(`${m.name}_bucket${labelText(s.labels, ['le', '+Inf'])} ${s.count}`)
      } else {
        for (const q of m.quantiles) {
          out.push(
            `${m.name}` +
              `${labelText(s.labels, ['quantile', formatPromValue(q)])} ` +
              `${formatPromValue(s.quantiles[quantileKey(q)] ?? null)}`,
          )
        }
      }
      out.push(
        `${m.name}_sum${labelText(s.labels)} ${formatPromValue(s.sum)}`,
        `${m.name}_count${labelText(s.labels)} ${s.count}`,
      )
    }
  }
  return out.length === 0 ? '' : `${out.join('\n')}\n`
}
