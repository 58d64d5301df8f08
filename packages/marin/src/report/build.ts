/** @module Building a report site in memory: every file it holds, by relative path. */
import { renderCharts } from './charts.js'
import { collectReport } from './collect.js'
import { renderHtml } from './html.js'
import { renderMarkdown } from './markdown.js'
import { logFile } from './site-parts.js'
import { resolveSource } from './source.js'
import { stepGraphSvg } from './step-graph.js'
import type { ReportData } from './types.js'

/** A built site: relative path → contents. */
export type Site = ReadonlyMap<string, string>

/**
 * The files of the site for `data`: `index.html`, `report.md`, `step-graph.svg`,
 * `charts/*.svg`, `logs/<step>/*` (the end of each log) and `data.json`.
 */
export async function buildSite(data: ReportData): Promise<Site> {
  const charts = await renderCharts(data.metrics)
  const graphSvg = stepGraphSvg(data.steps)
  const files = new Map<string, string>()
  const parts = { data, charts, graphSvg }
  files.set('index.html', renderHtml(parts))
  files.set('report.md', renderMarkdown(parts))
  files.set('step-graph.svg', graphSvg)
  for (const c of charts) files.set(c.file, c.svg)
  for (const s of data.steps) for (const l of s.logs) files.set(logFile(s.nameHash, l.path), l.tail)
  // The log tails are files of their own; data.json keeps only where they are.
  const steps = data.steps.map((s) => ({ ...s, logs: s.logs.map(({ tail: _tail, ...l }) => l) }))
  files.set('data.json', `${JSON.stringify({ ...data, steps }, null, 2)}\n`)
  return files
}

/** Resolves `source` (see `resolveSource`), gathers its data and builds the site. */
export async function buildReport(source: string, prefix: string): Promise<{ data: ReportData; site: Site }> {
  const { record, recordUrl } = await resolveSource(source, prefix)
  const data = await collectReport(record, recordUrl)
  return { data, site: await buildSite(data) }
}
