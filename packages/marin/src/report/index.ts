/** @module @marin/marin/report: the static report site of experiment runs (a page per run, charts with vega, an index
 * of every run), and publishing it (merged into the target). */
export { RUN_SUMMARY_FILE, buildReport, buildSite } from './build.js'
export type { Site } from './build.js'
export { collectReport, parseArtifactList, parseEvals, parseMetrics } from './collect.js'
export { resolveSource } from './source.js'
export type { ResolvedSource } from './source.js'
export { renderCharts, renderSvg } from './charts.js'
export type { Chart, XAxis } from './charts.js'
export { GRAPH_MAX_WIDTH, stepGraphLayout, stepGraphSvg } from './step-graph.js'
export { RUNS_FILE, mergeRuns, parseRuns, renderIndex, summaryOf } from './site-index.js'
export type { RunSummary } from './site-index.js'
export { runFolder } from './site-parts.js'
export { MANIFEST_FILE, publishSite } from './publish.js'
export type { PublishResult } from './publish.js'
export type {
  BackendShown,
  DatasetRows,
  EvalRow,
  MetricRow,
  ReportArtifact,
  ReportData,
  ReportStep,
  RunRef,
  SampleRow,
  StepLogFile,
} from './types.js'
