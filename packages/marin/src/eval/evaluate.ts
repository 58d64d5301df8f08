/** @module Run a suite of tasks against a model, store the results in finestore and return them as JSON. */
import type { JsonObject, Store } from '@marin/finestore'
import { logger } from '@marin/rigging'
import { MarinError } from '../errors.js'
import { BUILTIN_TASKS, builtinTask } from './brown-tasks.js'
import type { BuiltinTaskOptions } from './brown-tasks.js'
import type { LanguageModel } from './language-model.js'
import { storeResults, summarize } from './results-store.js'
import type { EvalSummary } from './results-store.js'
import { runTask } from './run-task.js'
import type { TaskResult } from './run-task.js'
import { LM_EVAL_SUITES, findTaskYaml, readLmEvalTask } from './lm-eval-task.js'
import type { LmEvalOptions, LmEvalTask } from './lm-eval-task.js'
import { readTaskFile } from './task.js'
import type { EvalTask } from './task.js'

const log = logger('marin').child({ component: 'eval' })

export type ResolveTasksOptions = BuiltinTaskOptions & {
  /** Where lm-evaluation-harness task YAML and its data are found. */
  readonly lmEval?: LmEvalOptions
}

/**
 * Tasks from names: a `.jsonl` path is a task file; a `.yaml`/`.yml` path an lm-evaluation-harness
 * task; a suite name (`core`, `marin_core`, see `LM_EVAL_SUITES`) its tasks (each with the suite's
 * `num_fewshot`, unless `lmEval.numFewshot` is set); a built-in task name that task; any
 * other name an lm-eval task found by its `task:` under `lmEval.tasksDir`.
 */
export async function resolveTasks(
  specs: readonly string[],
  o: ResolveTasksOptions = {},
): Promise<(EvalTask | LmEvalTask)[]> {
  const out: (EvalTask | LmEvalTask)[] = []
  const lm = o.lmEval ?? {}
  const byName = async (name: string, own: LmEvalOptions = lm) => {
    if (lm.tasksDir === undefined)
      throw new MarinError(
        'BAD_CONFIG',
        `task "${name}" is not built in (${BUILTIN_TASKS.join(', ')}); for an lm-evaluation-harness ` +
          `task pass --lm-eval-tasks DIR (a folder of its task YAML) or the YAML file's path`,
      )
    const file = findTaskYaml(lm.tasksDir, name)
    if (!file) throw new MarinError('BAD_CONFIG', `task ${name}: no YAML under ${lm.tasksDir} has "task: ${name}"`)
    return readLmEvalTask(file, own)
  }
  for (const s of specs) {
    if (s.endsWith('.jsonl')) out.push(await readTaskFile(s))
    else if (/\.ya?ml$/.test(s)) out.push(await readLmEvalTask(s, lm))
    else if (LM_EVAL_SUITES[s])
      for (const e of LM_EVAL_SUITES[s]) {
        if (typeof e === 'string') out.push(await byName(e))
        else {
          // As Marin passes num_fewshot per task: a run-wide numFewshot still wins.
          const t = await byName(e.task, { ...lm, numFewshot: lm.numFewshot ?? e.numFewshot })
          out.push(e.alias ? { ...t, name: e.alias } : t)
        }
      }
    else if ((BUILTIN_TASKS as readonly string[]).includes(s)) out.push(builtinTask(s, o))
    else out.push(await byName(s))
  }
  return out
}

export type EvaluateOptions = {
  readonly model: LanguageModel
  readonly tasks: readonly (EvalTask | LmEvalTask)[]
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
