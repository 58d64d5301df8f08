/** @module What the HTML and Markdown renderers share: the rendered pieces and derived values. */
import type { Chart } from './charts.js'
import type { MetricRow, ReportData, RunRef } from './types.js'

/** The collected data plus what was rendered from it. */
export type SiteParts = {
  readonly data: ReportData
  readonly charts: readonly Chart[]
  readonly graphSvg: string
  /** Whether the site holds the project's docs under `docs/` (see docs-site.ts), which the pages then link. */
  readonly docs?: boolean
}

/** Provenance fields the report shows, tolerant of records written without them. */
export type ShownProvenance = {
  gitSha: string | null
  gitDirty: boolean | null
  host?: string
  node?: string
  timestamp?: string
  packages: Record<string, string>
}

export function provenanceOf(p: unknown): ShownProvenance {
  const o = (p && typeof p === 'object' ? p : {}) as Record<string, unknown>
  const str = (v: unknown) => (typeof v === 'string' ? v : undefined)
  const packages: Record<string, string> = {}
  if (o.packages && typeof o.packages === 'object')
    for (const [k, v] of Object.entries(o.packages)) if (typeof v === 'string') packages[k] = v
  return {
    gitSha: str(o.gitSha) ?? null,
    gitDirty: typeof o.gitDirty === 'boolean' ? o.gitDirty : null,
    ...(str(o.host) ? { host: str(o.host)! } : {}),
    ...(str(o.node) ? { node: str(o.node)! } : {}),
    ...(str(o.timestamp) ? { timestamp: str(o.timestamp)! } : {}),
    packages,
  }
}

/** The folder of a run's page inside the site: `runs/<experiment>/<run>`. */
export function runFolder(r: RunRef): string {
  return `runs/${r.experiment}/${r.run}`
}

/** A relative link from the page of run `from` to the page of run `to`. */
export function runLink(from: RunRef, to: RunRef): string {
  return from.experiment === to.experiment ? `../${to.run}/index.html` : `../../${to.experiment}/${to.run}/index.html`
}

/** Where the site keeps a copy of an artifact version's manifest, relative to the run's page. */
export function artifactFile(artifact: string, version: number): string {
  return `artifacts/${artifact}@${version}.json`
}

/** Where a step's log is copied inside the run's folder. */
export function logFile(nameHash: string, path: string): string {
  return `logs/${nameHash}/${path.replace(/^logs\//, '')}`
}

/** The last value of the headline metrics, for the summary line. */
export function finalMetrics(rows: readonly MetricRow[]): [string, number][] {
  const keys = ['train/loss', 'eval/loss', 'eval/bpb', 'throughput/tokens_per_sec']
  const out: [string, number][] = []
  for (const k of keys) {
    const last = [...rows].reverse().find((r) => r.values[k] !== undefined)
    if (last) out.push([`final ${k} (step ${last.step})`, last.values[k]!])
  }
  return out
}
