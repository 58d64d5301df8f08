/** @module Run a task against a `LanguageModel` and compute its metrics (lm-eval-harness semantics). */
import type { LanguageModel } from './language-model.js'
import { splitBoundary } from './language-model.js'
import { mean, meanStderr, ratioWithStderr, utf8Length } from './stats.js'
import type { LmEvalOutputType, LmEvalTask } from './lm-eval-task.js'
import { runLmEvalTask } from './lm-eval-run.js'
import { multipleChoiceMetrics, scoreChoices } from './multiple-choice.js'
import type { EvalTask, GenerationItem, MultipleChoiceItem, PerplexityItem, TaskKind } from './task.js'

/** One metric of a task: its value and the standard error of that value. */
export type MetricValue = { readonly metric: string; readonly value: number; readonly stderr: number }

/** What a task produced: metrics, the number of samples and one record per sample. */
export type TaskResult = {
  readonly task: string
  /** The JSONL task kind, or the lm-eval task's `output_type`. */
  readonly kind: TaskKind | LmEvalOutputType
  readonly model: string
  readonly samples: number
  readonly metrics: readonly MetricValue[]
  readonly records: readonly Record<string, unknown>[]
}

export type RunTaskOptions = {
  /** Evaluate only the first `limit` items. */
  readonly limit?: number
}

async function multipleChoice(model: LanguageModel, items: readonly MultipleChoiceItem[]) {
  const reqs = items.flatMap((it) => it.choices.map((c) => splitBoundary(it.context, c)))
  const scores = await model.loglikelihood(reqs)
  let k = 0
  const records = items.map((it, index) => {
    const lls = it.choices.map(() => scores[k++]!.logprob)
    return {
      index,
      context: it.context,
      choices: it.choices,
      gold: it.gold,
      loglikelihoods: lls,
      ...scoreChoices(lls, it.choices, it.gold),
    }
  })
  const m = multipleChoiceMetrics(records)
  return { records, metrics: [m.get('acc')!, m.get('acc_norm')!] }
}

/** Cut generated text at the first stop sequence, looking past leading whitespace (so a stop of " " still lets " word"
 * through). */
export function applyStops(text: string, stop: readonly string[]): string {
  const lead = /^\s*/.exec(text)![0].length
  let end = text.length
  for (const s of stop) {
    const at = text.indexOf(s, lead)
    if (at >= 0 && at < end) end = at
  }
  return text.slice(0, end)
}

async function generation(model: LanguageModel, items: readonly GenerationItem[]) {
  const outs = await model.generate(items.map((it) => ({ context: it.context, maxTokens: it.maxTokens ?? 32 })))
  const records = items.map((it, index) => {
    const prediction = applyStops(outs[index]!, it.stop ?? ['\n']).trim()
    return {
      index,
      context: it.context,
      answer: it.answer,
      generated: outs[index]!,
      prediction,
      exactMatch: prediction === it.answer.trim() ? 1 : 0,
    }
  })
  const em = records.map((r) => r.exactMatch)
  return { records, metrics: [{ metric: 'exact_match', value: mean(em), stderr: meanStderr(em) }] }
}

async function perplexity(model: LanguageModel, items: readonly PerplexityItem[]) {
  // Each document follows a single newline, so every byte of it is predicted from something.
  const scores = await model.loglikelihood(items.map((it) => ({ context: '\n', continuation: it.text })))
  const records = items.map((it, index) => {
    const bytes = utf8Length(it.text),
      ll = scores[index]!.logprob
    return { index, bytes, tokens: scores[index]!.tokens, loglikelihood: ll, bitsPerByte: -ll / Math.LN2 / bytes }
  })
  const bpb = ratioWithStderr(
    records.map((r) => -r.loglikelihood / Math.LN2),
    records.map((r) => r.bytes),
  )
  const bytePpl = 2 ** bpb.value
  return {
    records,
    metrics: [
      { metric: 'bits_per_byte', value: bpb.value, stderr: bpb.stderr },
      { metric: 'byte_perplexity', value: bytePpl, stderr: bytePpl * Math.LN2 * bpb.stderr },
    ],
  }
}

/**
 * Evaluate one task.
 * @example const r = await runTask(new LocalLanguageModel(model, tok), await readTaskFile('cloze.jsonl'))
 */
export async function runTask(
  model: LanguageModel,
  task: EvalTask | LmEvalTask,
  options: RunTaskOptions = {},
): Promise<TaskResult> {
  const limit = options.limit ?? Infinity
  if (task.kind === 'lm_eval') return runLmEvalTask(model, task, limit)
  const out =
    task.kind === 'multiple_choice'
      ? await multipleChoice(model, task.items.slice(0, limit))
      : task.kind === 'generation'
        ? await generation(model, task.items.slice(0, limit))
        : await perplexity(model, task.items.slice(0, limit))
  return {
    task: task.name,
    kind: task.kind,
    model: model.description,
    samples: out.records.length,
    metrics: out.metrics,
    records: out.records,
  }
}
