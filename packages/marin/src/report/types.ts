/** @module What a report is built from: everything gathered about one experiment run, as plain data. */
import type { ExperimentRecord, StepRecord } from '../executor/executor.js'

/** One log file of a step, with its last lines kept for the report. */
export type StepLogFile = {
  /** Path relative to the step's output folder, e.g. `logs/step.log`. */
  readonly path: string
  readonly bytes: number
  /** The last bytes of the log (at most `LOG_TAIL_BYTES`), as text. */
  readonly tail: string
}

/** A step as the report shows it: its record plus what its output folder holds. */
export type ReportStep = StepRecord & {
  /** The on-disk status word (`.executor_status`), when there is one. */
  readonly diskStatus?: string
  readonly logs: readonly StepLogFile[]
  /** A link to the step's output folder (a `file://` URL on a local prefix, else the storage URL). */
  readonly outputUrl: string
}

/** A finestore version a step committed, with its manifest's summary. */
export type ReportArtifact = {
  /** `name@version`. */
  readonly ref: string
  readonly artifact: string
  readonly version: number
  readonly kind: string
  readonly createdAt: string
  readonly files: number
  readonly bytes: number
  readonly metadata: Readonly<Record<string, unknown>>
  readonly lineage: readonly string[]
  /** The step that listed it in its `artifacts.json`. */
  readonly step: string
  /** A link to the version's manifest in the store (`file://` on a local prefix). */
  readonly url: string
}

/** One line of a levanter `metrics.jsonl`, with the step that wrote it. */
export type MetricRow = {
  readonly source: string
  readonly step: number
  readonly values: Readonly<Record<string, number>>
}

/** One score of the eval table. */
export type EvalRow = {
  readonly source: string
  readonly task: string
  readonly metric: string
  readonly value: number
  readonly stderr?: number
}

/** One sample generation. */
export type SampleRow = {
  readonly source: string
  readonly prompt: string
  readonly completion: string
  readonly expected?: string
}

/** Everything a report shows about one experiment run. */
export type ReportData = {
  readonly record: ExperimentRecord
  /** Where the record was read from. */
  readonly recordUrl: string
  readonly steps: readonly ReportStep[]
  readonly artifacts: readonly ReportArtifact[]
  readonly metrics: readonly MetricRow[]
  readonly evals: readonly EvalRow[]
  readonly samples: readonly SampleRow[]
  /** Problems met while gathering (an unreadable metrics line, a missing artifact), shown in the report. */
  readonly warnings: readonly string[]
}
