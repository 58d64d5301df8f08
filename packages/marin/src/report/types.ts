/** @module What a report is built from: everything gathered about one experiment run, as plain data. */
import type { ExperimentRecord, StepRecord } from '../executor/executor.js'
import type { MixtureShown } from './mixture.js'

export type { MixtureShown } from './mixture.js'

/** One log file of a step, with its last lines kept for the report. */
export type StepLogFile = {
  /** Path relative to the step's output folder, e.g. `logs/step.log`. */
  readonly path: string
  readonly bytes: number
  /** The last bytes of the log (at most `LOG_TAIL_BYTES`), as text. */
  readonly tail: string
}

/** The run that made a step's output (what a SKIPPED step reused). */
export type RunRef = { readonly experiment: string; readonly run: string }

/** A step as the report shows it: its record plus what its output folder holds. */
export type ReportStep = StepRecord & {
  /** The on-disk status word (`.executor_status`), when there is one. */
  readonly diskStatus?: string
  readonly logs: readonly StepLogFile[]
  /** The resolved config the step ran with (`.executor_info`), when readable. */
  readonly config?: unknown
  /** For a step that did not run in this run: the newest earlier run in which it succeeded. */
  readonly madeBy?: RunRef
}

/** The first rows of a dataset artifact, long text shortened. */
export type DatasetRows = {
  /** The file of the artifact they were read from. */
  readonly file: string
  /** The columns shown (`id` and `text` first), at most `MAX_COLUMNS`. */
  readonly columns: readonly string[]
  readonly rows: readonly (readonly string[])[]
  /** How many more columns the rows have that are not shown. */
  readonly omittedColumns?: number
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
  /** Where the site keeps a copy of the version's manifest, relative to the run's page. */
  readonly url: string
  /** The manifest itself (copied into the site, left out of `data.json`). */
  readonly manifest: unknown
  /** For datasets: the first rows. */
  readonly rows?: DatasetRows
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

/** One evaluated sample: the prompt, what the model answered, the expected answer and its scores. */
export type SampleRow = {
  readonly source: string
  readonly prompt: string
  readonly completion: string
  readonly expected?: string
  /** Per-sample scores (`exact_match`, `acc`, `acc_norm`), by metric name. */
  readonly scores: Readonly<Record<string, number>>
}

/** The tensor backend a training step ran on, as levanter reported it (`initBackend()`). */
export type BackendShown = {
  readonly step: string
  readonly name: string
  readonly threads?: number
  readonly simd?: boolean
  readonly gemm?: string
  /** With the native GEMM: its instruction set and threads, as text (`AVX-512, 2 threads`). */
  readonly native?: string
  readonly adapter?: string
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
  /** The backends training steps ran on. */
  readonly backends: readonly BackendShown[]
  /** Tokens per optimizer step of each training step (batch size × sequence length from its config), by step name. */
  readonly tokensPerStep: Readonly<Record<string, number>>
  /** The data mixture of each training step that trained on one (present when any did). */
  readonly mixtures?: readonly MixtureShown[]
  /** Problems met while gathering (an unreadable metrics line, a missing artifact), shown in the report. */
  readonly warnings: readonly string[]
}
