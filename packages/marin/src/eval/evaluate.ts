/** @module Run a suite of tasks against a model, store the results in finestore and return them as JSON. */
import type { JsonObject, Store } from '@marin/finestore'
import { logger } from '@marin/rigging'
import { builtinTask } from './brown-tasks.js'
import type { BuiltinTaskOptions } from './brown-tasks.js'
import type { LanguageModel } from './language-model.js'
import { storeResults, summarize } from './results-store.js'
import type { EvalSummary } from './results-store.js'
import { runTask } from './run-task.js'
import type { TaskResult } from './run-task.js'
import { readTaskFile } from './task.js'
import type { EvalTask } from './task.js'

const log = logger('marin').child({ component: 'eval' })

/** Tasks from names: a `.jsonl` path is a user task file, anything else a built-in task. */
export async function resolveTasks(specs: readonly string[], builtin: BuiltinTaskOptions = {}): Promise<EvalTask[]> {
  const out: EvalTask[] = []
  for (const s of specs) out.push(s.endsWith('.jsonl') ? await readTaskFile(s) : builtinTask(s, builtin))
  return out
}

export type EvaluateOptions = {
  readonly model: LanguageModel
  readonly tasks: readonly EvalTask[]
  /** Items per task. */
  readonly limit?: number
  /** Where to store results; without it nothing is stored. */
  readonly store?: Store
  /** @default 'eval/results' */
  readonly artifact?: string
  /** Input refs recorded as lineage (the checkpoint). */
  readonly lineage?: readonly string[]
  readonly config?: JsonObject
}

export type EvaluateResult = {
  readonly summary: EvalSummary
  readonly results: readonly TaskResult[]
  /** `artifact@version` of the stored results. */
  readonly ref?: string
}

/**
 * Evaluate every task, then store the results.
 * @example const { summary, ref } = await evaluate({ model, tasks: await resolveTasks(['brown_cloze']), store })
 */
export async function evaluate(o: EvaluateOptions): Promise<EvaluateResult> {
  const results: TaskResult[] = []
  for (const task of o.tasks) {
    const r = await runTask(o.model, task, { limit: o.limit })
    log.info(
      { task: r.task, samples: r.samples, metrics: Object.fromEntries(r.metrics.map((m) => [m.metric, m.value])) },
      'task evaluated',
    )
    results.push(r)
  }
  const summary = summarize(results)
  if (!o.store) return { summary, results }
  const { ref } = await storeResults(o.store, results, { artifact: o.artifact, lineage: o.lineage, config: o.config })
  return { summary, results, ref }
}
