/** @module @marin/marin/eval: evaluation tasks, language models (in-process or over HTTP), running and storing results.
 * */
export { BROWN_HELD_OUT_FILES, BUILTIN_TASKS, brownSentences, builtinTask } from './brown-tasks.js'
export type { BuiltinTaskName, BuiltinTaskOptions } from './brown-tasks.js'
export {
  GenerationItem,
  MultipleChoiceItem,
  PerplexityItem,
  TASK_KINDS,
  parseTaskJsonl,
  readTaskFile,
  taskToJsonl,
} from './task.js'
export type { EvalTask, TaskKind } from './task.js'
export { splitBoundary } from './language-model.js'
export type { GenerateRequest, LanguageModel, LoglikelihoodRequest, LoglikelihoodResult } from './language-model.js'
export { LocalLanguageModel, tokenizeWithOffsets } from './local-model.js'
export { OpenAICompletionsModel } from './openai-model.js'
export type { OpenAICompletionsOptions } from './openai-model.js'
export { continuationTokens } from './alignment.js'
export { applyStops, runTask } from './run-task.js'
export type { MetricValue, RunTaskOptions, TaskResult } from './run-task.js'
export { mean, meanStderr, ratioWithStderr } from './stats.js'
export { storeResults, summarize } from './results-store.js'
export type { EvalSummary, StoreResultsOptions } from './results-store.js'
export { evaluate, resolveTasks } from './evaluate.js'
export type { EvaluateOptions, EvaluateResult, ResolveTasksOptions } from './evaluate.js'
export {
  DEFAULT_FEWSHOT_SEED,
  LM_EVAL_METRICS,
  LM_EVAL_OUTPUT_TYPES,
  LM_EVAL_SUITES,
  findTaskYaml,
  readLmEvalTask,
} from './lm-eval-task.js'
export type { LmEvalOptions, LmEvalOutputType, LmEvalSuiteTask, LmEvalTask } from './lm-eval-task.js'
export { lmEvalMetricNames, runLmEvalTask } from './lm-eval-run.js'
export { FEWSHOT_SAMPLERS } from './lm-eval-fewshot.js'
export type { FewshotSpec } from './lm-eval-fewshot.js'
export { LM_EVAL_FILTERS, applyFilter } from './lm-eval-filters.js'
export type { LmEvalFilter } from './lm-eval-filters.js'
export { PythonRandom } from './python-random.js'
export { evalStep } from './eval-step.js'
export type { EvalStepConfig } from './eval-step.js'
export { serveProcess } from './serve-process.js'
export type { ServeProcess, ServeProcessOptions } from './serve-process.js'
