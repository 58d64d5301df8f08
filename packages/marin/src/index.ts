/**
 * @module @marin/marin: experiments and the executor, and the steps for the usual work.
 * Heavier parts have their own entry points, so that importing the experiment API loads no
 * model, server or chart code: `@marin/marin/serve` (the OpenAI-compatible server),
 * `@marin/marin/eval` (evaluation), `@marin/marin/report` (reports). The `marin` CLI is `src/cli/`.
 */
import pkg from '../package.json' with { type: 'json' }

export const name: string = pkg.name
export const version: string = pkg.version

// Errors
export { MARIN_ERROR_CODES, MarinError, isMarinError } from './errors.js'
export type { MarinErrorCode } from './errors.js'

// Declaring experiments
export { Versioned, isVersioned, versioned } from './executor/versioned.js'
export { ArtifactInput, OutputRef, Step, isOutputRef, step } from './executor/step.js'
export type { Resolved, StepContext, StepFn, StepOptions } from './executor/step.js'
export { Config, Experiment, isExperiment } from './executor/experiment.js'
export type { ExperimentOptions } from './executor/experiment.js'
export { loadExperiment } from './executor/load-script.js'

// Running experiments: runExperiment is the one way; the others call it
export { runExperiment } from './executor/run-experiment.js'
export type { RunOptions } from './executor/run-experiment.js'
export { runIfMain, runMain } from './executor/main.js'

// Steps for the usual work
export { dedupStep, ingestStep, tokenizeStep } from './steps/datakit-steps.js'
export type { DedupStepOptions, IngestStepOptions, TokenizeStepOptions } from './steps/datakit-steps.js'
export { decontaminateStep, evalTaskTexts } from './steps/decontam-step.js'
export { languageFilterStep, qualityClassifierStep, qualityFilterStep, warcIngestStep } from './steps/web-steps.js'
export type {
  LanguageFilterStepOptions,
  QualityClassifierStepOptions,
  QualityFilterStepOptions,
  WarcIngestStepOptions,
} from './steps/web-steps.js'
export type { DecontaminateStepOptions } from './steps/decontam-step.js'
export { trainStep } from './steps/train-step.js'
export type {
  MixtureSummary,
  TrainMixtureInput,
  TrainStepOptions,
  TrainStepTrainer,
  TrainSummary,
} from './steps/train-step.js'
export { evalStep } from './eval/eval-step.js'
export type { EvalStepConfig } from './eval/eval-step.js'
export { BROWN_HELD_OUT_FILES, BUILTIN_TASKS } from './eval/brown-tasks.js'
export {
  artifactRef,
  formatArtifactRef,
  isArtifactRef,
  parseArtifactRef,
  parseStepArtifacts,
} from './executor/artifacts.js'
export type { ArtifactRef, StepArtifacts } from './executor/artifacts.js'
export { mainArtifact, writeArtifacts } from './steps/artifacts.js'
export type { StepArtifactsInput } from './steps/artifacts.js'

// Versions and the DAG
export { canonicalJson } from './executor/canonical-json.js'
export { computeVersions, resolveConfig } from './executor/version.js'
export type { StepVersion } from './executor/version.js'
export { dependenciesOf, topoSort } from './executor/graph.js'

// The executor
export { Executor, localRunner, outputPathOf, prepare } from './executor/executor.js'
export type {
  ExecutorOptions,
  ExperimentRecord,
  ExperimentRun,
  StepRecord,
  StepRunner,
  StepTask,
} from './executor/executor.js'
export { formatPlan, planStep } from './executor/plan.js'
export type { PlanEntry, PlannedAction } from './executor/plan.js'
export { runStepHere, waitForLease } from './executor/step-runner.js'
export type { RunStepOptions, StepResult } from './executor/step-runner.js'
export { STEP_STATUSES, readHistory, readInfo, readStatus } from './executor/status-files.js'
export type { HistoryEntry, StatusRecord, StepInfo, StepStatus } from './executor/status-files.js'
export { explainStep, formatExplanation } from './executor/explain.js'
export type { Explanation, FieldChange } from './executor/explain.js'
export { irisRunner } from './executor/iris-runner.js'
