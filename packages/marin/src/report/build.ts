/**
 * @module Building a report site in memory: every file it holds, by relative path. A run's files
 * go under `runs/<experiment>/<run>/`; the site's front page (`index.html`) and its list of runs
 * (`runs.json`) are at the root, and publishing merges them with the runs already at the target.
 */
import { renderCharts } from './charts.js'
import { scrubFingerprinted } from '@marin/rigging'
import { gatherReport } from './collect.js'
import { readDocsSite } from './docs-site.js'
import { renderHtml } from './html.js'
import { renderMarkdown } from './markdown.js'
import { RUNS_FILE, formatRuns, renderIndex, summaryOf } from './site-index.js'
import { logFile, runFolder } from './site-parts.js'
import { resolveSource } from './source.js'
import { stepGraphSvg } from './step-graph.js'
import type { ReportData } from './types.js'

/** A built site: relative path → contents. */
export type Site = ReadonlyMap<string, string>

/** The name of a run's summary inside its folder, which publishing adds to the site's `runs.json`. */
export const RUN_SUMMARY_FILE = 'summary.json'

/**
 * The files of the site for `data`: in the run's folder `index.html`, `report.md`,
 * `step-graph.svg`, `charts/*.svg`, `logs/<step>/*` (the end of each log), `artifacts/*.json`
 * (the manifests), `data.json` and `summary.json`; at the root `index.html` and `runs.json`
 * listing this run.
 */
export async function buildSite(data: ReportData, o: { docs?: boolean } = {}): Promise<Site> {
  const charts = await renderCharts(data.metrics, data.tokensPerStep)
  const graphSvg = stepGraphSvg(data.steps)
  const dir = runFolder(data.record)
  const files = new Map<string, string>()
  const put = (path: string, body: string) => files.set(`${dir}/${path}`, body)
  const parts = { data, charts, graphSvg, docs: !!o.docs }
  put('index.html', renderHtml(parts))
  put('report.md', renderMarkdown(parts))
  put('step-graph.svg', graphSvg)
  for (const c of charts) put(c.file, c.svg)
  for (const s of data.steps) for (const l of s.logs) put(logFile(s.nameHash, l.path), l.tail)
  for (const a of data.artifacts) put(a.url, `${JSON.stringify(a.manifest, null, 2)}\n`)
  // The log tails and manifests are files of their own; data.json keeps only where they are.
  const steps = data.steps.map((s) => ({ ...s, logs: s.logs.map(({ tail: _tail, ...l }) => l) }))
  const artifacts = data.artifacts.map(({ manifest: _manifest, ...a }) => a)
  put('data.json', `${JSON.stringify({ ...data, steps, artifacts }, null, 2)}\n`)
  const summary = summaryOf(data)
  put(RUN_SUMMARY_FILE, `${JSON.stringify(summary, null, 2)}\n`)
  files.set(RUNS_FILE, formatRuns([summary]))
  files.set('index.html', renderIndex([summary], o))
  return files
}

/**
 * Resolves `source` (see `resolveSource`), gathers its data and builds the site. Every secret the run's steps
 * registered is scrubbed from the data, and once more from every file of the site. With `docs` (a folder that
 * `pnpm run docs` built), the site holds the docs under `docs/` and its pages link them.
 */
export async function buildReport(
  source: string,
  prefix: string,
  o: { docs?: string } = {},
): Promise<{ data: ReportData; site: Site }> {
  const docs = o.docs === undefined ? undefined : readDocsSite(o.docs)
  const { record, recordUrl } = await resolveSource(source, prefix)
  const { data, secrets } = await gatherReport(record, recordUrl)
  const built = await buildSite(data, { docs: docs !== undefined })
  const site = docs ? new Map([...built, ...docs]) : built
  if (secrets.length === 0) return { data, site }
  return { data, site: new Map([...site].map(([p, body]) => [p, scrubFingerprinted(body, secrets)])) }
}
