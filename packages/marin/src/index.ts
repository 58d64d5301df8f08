/** @module @marin/marin: experiments and the executor, evaluation, an OpenAI-compatible server, reports and the marin CLI. */
import pkg from '../package.json' with { type: 'json' }

export const name: string = pkg.name
export const version: string = pkg.version

// Errors
export { MARIN_ERROR_CODES, MarinError, isMarinError } from './errors.js'
export type { MarinErrorCode } from './errors.js'

// Declaring experiments
export { Versioned, isVersioned, versioned } from './executor/versioned.js'
export { OutputRef, Step, isOutputRef, step } from './executor/step.js'
export type { Resolved, StepContext, StepFn, StepOptions } from './executor/step.js'
export { Config, Experiment, isExperiment } from './executor/experiment.js'
export { runIfMain, runMain } from './executor/main.js'
export type { ExperimentOptions } from './executor/experiment.js'
export { loadExperiment } from './executor/load-script.js'

// Steps for the usual data work
export { dedupStep, ingestStep, tokenizeStep } from './steps/datakit-steps.js'
export type { DedupStepOptions, IngestStepOptions, TokenizeStepOptions } from './steps/datakit-steps.js'
export { trainStep } from './steps/train-step.js'
export type { TrainStepOptions, TrainStepTrainer, TrainSummary } from './steps/train-step.js'
export { mainArtifact, writeArtifacts } from './steps/artifacts.js'
export type { StepArtifacts } from './steps/artifacts.js'

// Versions and the DAG
export { canonicalJson } from './executor/canonical-json.js'
export { computeVersions, resolveConfig } from './executor/version.js'
export type { StepVersion } from './executor/version.js'
export { dependenciesOf, topoSort } from './executor/graph.js'

// The executor
export { Executor, defaultPrefix, localRunner, outputPathOf, prepare } from './executor/executor.js'
export type { ExecutorOptions, ExperimentRecord, ExperimentRun, StepRecord, StepRunner, StepTask } from './executor/executor.js'
export { formatPlan, planStep } from './executor/plan.js'
export type { PlanEntry, PlannedAction } from './executor/plan.js'
export { runStepHere, waitForLease } from './executor/step-runner.js'
export type { RunStepOptions, StepResult } from './executor/step-runner.js'
export { STEP_STATUSES, readHistory, readInfo, readStatus } from './executor/status-files.js'
export type { HistoryEntry, StatusRecord, StepInfo, StepStatus } from './executor/status-files.js'
export { explainStep, formatExplanation } from './executor/explain.js'
export type { Explanation, FieldChange } from './executor/explain.js'
export { runExperiment } from './executor/run-experiment.js'
export type { RunOptions } from './executor/run-experiment.js'
export { irisRunner } from './executor/iris-runner.js'

// Serving
export { startServer } from './serve/server.js'
export type { RunningServer, ServeOptions } from './serve/server.js'
export { loadModel } from './serve/load-model.js'
export type { LoadModelOptions, LoadedModel } from './serve/load-model.js'
export { Engine } from './serve/engine.js'
export type { EngineOptions, FinishReason, SequenceRequest, SequenceResult, TokenEvent } from './serve/engine.js'
export { createApp } from './serve/app.js'
export type { AppOptions } from './serve/app.js'

// Reports
export { buildReport, buildSite } from './report/build.js'
export type { Site } from './report/build.js'
export { collectReport, parseArtifactList, parseEvals, parseMetrics } from './report/collect.js'
export { resolveSource } from './report/source.js'
export type { ResolvedSource } from './report/source.js'
export { renderCharts, renderSvg } from './report/charts.js'
export type { Chart } from './report/charts.js'
export { stepGraphSvg } from './report/step-graph.js'
export { MANIFEST_FILE, publishSite } from './report/publish.js'
export type { PublishResult } from './report/publish.js'
export { publishReportCommand } from './report/cli.js'
export type { EvalRow, MetricRow, ReportArtifact, ReportData, ReportStep, SampleRow, StepLogFile } from './report/types.js'

// Evaluation
export { BROWN_HELD_OUT_FILES, BUILTIN_TASKS, brownSentences, builtinTask } from './eval/brown-tasks.js'
export type { BuiltinTaskName, BuiltinTaskOptions } from './eval/brown-tasks.js'
export { GenerationItem, MultipleChoiceItem, PerplexityItem, TASK_KINDS, parseTaskJsonl, readTaskFile, taskToJsonl } from './eval/task.js'
export type { EvalTask, TaskKind } from './eval/task.js'
export { splitBoundary } from './eval/language-model.js'
export type { GenerateRequest, LanguageModel, LoglikelihoodRequest, LoglikelihoodResult } from './eval/language-model.js'
export { LocalLanguageModel, tokenizeWithOffsets } from './eval/local-model.js'
export { OpenAICompletionsModel } from './eval/openai-model.js'
export type { OpenAICompletionsOptions } from './eval/openai-model.js'
export { continuationTokens } from './eval/alignment.js'
export { applyStops, runTask } from './eval/run-task.js'
export type { MetricValue, RunTaskOptions, TaskResult } from './eval/run-task.js'
export { mean, meanStderr, ratioWithStderr } from './eval/stats.js'
export { storeResults, summarize } from './eval/results-store.js'
export type { EvalSummary, StoreResultsOptions } from './eval/results-store.js'
export { evaluate, resolveTasks } from './eval/evaluate.js'
export type { EvaluateOptions, EvaluateResult } from './eval/evaluate.js'
export { evalStep } from './eval/eval-step.js'
export type { EvalStepConfig } from './eval/eval-step.js'
export { evalCommand } from './eval/cli.js'
export { serveProcess } from './eval/serve-process.js'
export type { ServeProcess, ServeProcessOptions } from './eval/serve-process.js'

// CLI
export { COMMANDS, buildProgram, runCli } from './cli/program.js'
export type { CommandFactory, Run } from './cli/program.js'
export { UsageError } from './cli/io.js'
export type { CliIo } from './cli/io.js'
