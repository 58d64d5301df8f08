/**
 * @module Decontamination against the evaluation tasks marin eval runs: a step that reads the tasks
 * by the names `evalStep` takes (built-in Brown tasks, `.jsonl` task files, lm-evaluation-harness
 * task YAML and suites), builds datakit's n-gram index over each task's documents (prompt and gold
 * answer together, as the model sees them; for an lm-eval task that sets `doc_to_decontamination_query`,
 * that query alone, as lm-eval's decontamination reads it) and calls datakit's `decontaminate` on the
 * dataset the input step made. The new dataset version carries the counts per task in its metadata; the step's
 * `artifacts.json` carries the report.
 *
 * The tasks and n are versioned: another task list is a new version of the step; datakit's own
 * version is content-addressed by the n-grams, so the same documents reuse it.
 *
 * @example decontaminateStep(deduped, { name: 'web-decontam', tasks: ['brown_cloze', 'brown_bpb'] })
 */
import { MarinError } from '../errors.js'
import type { ArtifactRef } from '../executor/artifacts.js'
import { step, type Step } from '../executor/step.js'
import { versioned } from '../executor/versioned.js'
import type { LmEvalTask } from '../eval/lm-eval-task.js'
import type { EvalTask } from '../eval/task.js'
import { prepareOutput, writeArtifacts } from './artifacts.js'

export type DecontaminateStepOptions = {
  /** Step name and the dataset written (`datasets/<name>`). */
  readonly name: string
  /** The tasks, named as `evalStep` names them: built-in names, `.jsonl` files, lm-eval `.yaml` files and suites. */
  readonly tasks: readonly string[]
  /** A folder of lm-evaluation-harness task YAML, searched for task names and suites. */
  readonly lmEvalTasks?: string
  /** Local datasets of lm-eval tasks (`<dataDir>/<dataset_path>/[<dataset_name>/]<split>.jsonl|.parquet`). */
  readonly dataDir?: string
  /** Items per built-in task. @default every item the task can draw (a superset of any evaluation's) */
  readonly size?: number
  /** Words per n-gram. @default 13 */
  readonly n?: number
  /** `remove` drops contaminated documents, `flag` keeps them with `meta.contamination`. @default 'remove' */
  readonly mode?: 'remove' | 'flag'
}

/** The whole pool of a built-in task: `builtinTask` takes every item when the size is at least the pool's. */
const ALL_ITEMS = Number.MAX_SAFE_INTEGER

const join = (a: string, b: string) => (b === '' || /^\s/.test(b) || /\s$/.test(a) ? a + b : `${a} ${b}`)

/**
 * The documents of one task as text: what the model is given and the gold answer it is scored on; for an
 * lm-eval task with `doc_to_decontamination_query`, the query's text instead (lm-eval matches the query in
 * place of `doc_to_text`, and so the parts of the prompt outside it are not matched).
 */
export async function evalTaskTexts(task: EvalTask | LmEvalTask): Promise<string[]> {
  if (task.kind === 'perplexity') return task.items.map((i) => i.text)
  if (task.kind === 'generation') return task.items.map((i) => join(i.context, i.answer))
  if (task.kind === 'multiple_choice') return task.items.map((i) => join(i.context, i.choices[i.gold]!))
  const { asIndex, choicesOf, value } = await import('../eval/lm-eval-fields.js')
  const query = task.docToDecontaminationQuery
  return task.docs.map((doc, i) => {
    const what = (f: string) => `${task.source}: ${f} of document ${i}`
    if (query !== undefined) {
      // a template whose value is a list (`{{[a, b]}}`) gives its items, one after another
      const q = value(query, doc, what('doc_to_decontamination_query'))
      return Array.isArray(q) ? q.map(String).join(' ') : String(q ?? '')
    }
    let text: unknown = value(task.docToText, doc, what('doc_to_text'))
    let target: unknown = value(task.docToTarget, doc, what('doc_to_target'))
    if (task.docToChoice !== undefined) {
      const choices = choicesOf(task.docToChoice, doc, what('doc_to_choice'))
      if (Array.isArray(choices)) {
        // Multiple inputs (Winogrande): the text is the index of the context among the choices.
        const t = asIndex(text)
        if (task.multipleInputs || t !== undefined) text = choices[t ?? -1] ?? text
        else {
          const g = asIndex(target)
          if (g !== undefined && g < choices.length) target = choices[g]
        }
      }
    }
    return join(String(text), Array.isArray(target) ? String(target[0] ?? '') : String(target))
  })
}

/** Removes (or flags) the documents of the dataset `input` made that share an n-gram with the tasks' documents. */
export function decontaminateStep(input: Step, o: DecontaminateStepOptions): Step {
  if (!Array.isArray(o.tasks) || o.tasks.length === 0)
    throw new MarinError(
      'BAD_STEP',
      `step ${o.name}: tasks is empty; name the evaluation tasks to decontaminate against`,
    )
  if (o.mode !== undefined && o.mode !== 'remove' && o.mode !== 'flag')
    throw new MarinError('BAD_STEP', `step ${o.name}: mode must be 'remove' or 'flag', got ${String(o.mode)}`)
  if (o.size !== undefined && !(Number.isInteger(o.size) && o.size > 0))
    throw new MarinError('BAD_STEP', `step ${o.name}: size ${o.size} must be a positive integer`)
  return step({
    name: o.name,
    description: `decontaminate against ${o.tasks.join(', ')}`,
    config: {
      input: input.artifact(),
      output: versioned(o.name),
      tasks: versioned([...o.tasks]),
      n: versioned(o.n ?? 13),
      mode: versioned(o.mode ?? 'remove'),
      ...(o.size !== undefined ? { size: versioned(o.size) } : {}),
      ...(o.lmEvalTasks !== undefined ? { lmEvalTasks: versioned(o.lmEvalTasks) } : {}),
      ...(o.dataDir !== undefined ? { dataDir: versioned(o.dataDir) } : {}),
    },
    fn: async (resolved, { outputPath, prefix, log }) => {
      const c = resolved as typeof resolved & { size?: number; lmEvalTasks?: string; dataDir?: string }
      await prepareOutput(outputPath)
      const ref = c.input as ArtifactRef
      if (!ref.name.startsWith('datasets/'))
        throw new MarinError(
          'BAD_STEP',
          `step ${o.name}: its input is ${ref.name}@${ref.version}, not a dataset (datasets/<name>); ` +
            'give it the step that made a dataset',
        )
      const [{ buildNgramIndex, decontaminate }, { resolveTasks }] = await Promise.all([
        import('@marin/datakit'),
        import('../eval/evaluate.js'),
      ])
      const lmEval = {
        ...(c.lmEvalTasks !== undefined ? { tasksDir: c.lmEvalTasks } : {}),
        ...(c.dataDir !== undefined ? { dataDir: c.dataDir } : {}),
        // the documents themselves, not few-shot examples drawn from another split
        numFewshot: 0,
      }
      const tasks = await resolveTasks(c.tasks, { size: c.size ?? ALL_ITEMS, lmEval })
      const sets = await Promise.all(tasks.map(async (t) => ({ task: t.name, texts: await evalTaskTexts(t) })))
      const index = await buildNgramIndex(sets, { n: c.n })
      const r = await decontaminate(ref.name.slice('datasets/'.length), {
        version: ref.version,
        index,
        mode: c.mode as 'remove' | 'flag',
        output: c.output,
        prefix,
      })
      log.info(
        { ref: r.ref, reused: r.reused, contaminated: r.report.contaminated, kept: r.report.kept },
        'decontaminated',
      )
      await writeArtifacts(outputPath, { artifacts: [r.ref], report: r.report })
    },
  })
}
