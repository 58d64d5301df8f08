/**
 * @module Run an lm-evaluation-harness task (see `lm-eval-task.ts`) with lm-eval's request shapes
 * and metrics: `multiple_choice` (one context, each choice after `target_delimiter`; or, with
 * multiple inputs, each choice as a context and one continuation), `loglikelihood`,
 * `generate_until` (with `filter_list` pipelines, each scored as `metric,pipeline`) and
 * `loglikelihood_rolling`. Each context starts with the task's description and few-shot examples
 * (`lm-eval-fewshot.ts`), drawn per document in order from one sampler per run. `doc_to_*` fields
 * are read as lm-eval reads them (`lm-eval-fields.ts`).
 *
 * Differences from lm-eval: `loglikelihood_rolling` and `acc_mutual_info`'s unconditional scores
 * condition on a newline instead of the BOS/EOT token (the model contract is text); `exact_match`
 * compares after trimming whitespace; generation is greedy (one response per document).
 */
import { MarinError } from '../errors.js'
import type { LanguageModel } from './language-model.js'
import { splitBoundary } from './language-model.js'
import { asIndex, choicesOf, text as fieldText, listLiteral, value } from './lm-eval-fields.js'
import { FewshotDrawer, exampleText } from './lm-eval-fewshot.js'
import { applyFilter, exactMatchScore } from './lm-eval-filters.js'
import type { Doc } from './lm-eval-functions.js'
import type { LmEvalTask } from './lm-eval-task.js'
import { argmax, multipleChoiceMetrics, scoreChoices } from './multiple-choice.js'
import type { MetricValue, TaskResult } from './run-task.js'
import { mean, meanStderr, ratioWithStderr, utf8Length } from './stats.js'

/** How errors name a task: its file and name. */
const where = (t: LmEvalTask) => `${t.source} (task ${t.name})`

/**
 * What comes before each document's own text: the description (rendered for the document) and its
 * few-shot examples, drawn in document order from one sampler per run, as the harness does.
 */
function prefixes(t: LmEvalTask, docs: readonly Doc[]): string[] {
  const drawer = t.fewshot && t.numFewshot > 0 ? new FewshotDrawer(t.fewshot, t.fewshotSeed) : undefined
  const multi = t.outputType === 'multiple_choice' && isMultipleInput(t, docs)
  return docs.map((doc, i) => {
    const description = t.description ? fieldText(t.description, doc, `${where(t)}: description of document ${i}`) : ''
    if (!drawer) return description
    const examples = drawer.draw(t.numFewshot, doc)
    return description + examples.map((e) => exampleText(drawer.spec, e, multi, where(t))).join('')
  })
}

/**
 * Multiple inputs (Winogrande): set in the YAML, or the first document's text is a choice index
 * (the harness's test).
 */
function isMultipleInput(t: LmEvalTask, docs: readonly Doc[]): boolean {
  if (t.multipleInputs) return true
  if (docs.length === 0) return false
  return asIndex(value(t.docToText, docs[0]!, `${where(t)}: doc_to_text of document 0`)) !== undefined
}

type Out = { records: Record<string, unknown>[]; metrics: Map<string, MetricValue> }

/** The unconditional context of `acc_mutual_info` (the harness's empty context, which its models fill with BOS/EOT). */
export const UNCONDITIONAL_CONTEXT = '\n'

async function multipleChoice(model: LanguageModel, t: LmEvalTask, docs: readonly Doc[]): Promise<Out> {
  const what = (k: string, i: number) => `${where(t)}: ${k} of document ${i}`
  const mutualInfo = t.metrics.some((m) => m.metric === 'acc_mutual_info')
  const multi = isMultipleInput(t, docs)
  const pre = prefixes(t, docs)
  const shaped = docs.map((doc, i) => {
    const text = value(t.docToText, doc, what('doc_to_text', i))
    const target = value(t.docToTarget, doc, what('doc_to_target', i))
    const choices = choicesOf(t.docToChoice!, doc, what('doc_to_choice', i))
    if (!Array.isArray(choices) || choices.length < 2)
      throw new MarinError(
        'BAD_CONFIG',
        `${what('doc_to_choice', i)}: expected a list of choices, got ${JSON.stringify(choices)}`,
      )
    const ch = choices.map(String)
    // Multiple inputs (Winogrande): the text is the gold index, each choice a context, the target the continuation.
    const gold = multi ? asIndex(text) : (asIndex(target) ?? ch.indexOf(String(target)))
    if (gold === undefined || gold < 0 || gold >= ch.length)
      throw new MarinError(
        'BAD_CONFIG',
        `${what('doc_to_target', i)}: ${JSON.stringify(target)} is not one of the ${ch.length} choices`,
      )
    const prefix = pre[i]!
    const reqs = multi
      ? ch.map((c) => splitBoundary(prefix + c, t.targetDelimiter + String(target)))
      : ch.map((c) => splitBoundary(prefix + String(text), t.targetDelimiter + c))
    // acc_mutual_info: each `target_delimiter + choice` also scored without the context.
    const unconditional = mutualInfo
      ? ch.map((c) => ({ context: UNCONDITIONAL_CONTEXT, continuation: t.targetDelimiter + c }))
      : []
    return { ch, gold, reqs, unconditional }
  })
  const scores = await model.loglikelihood(shaped.flatMap((s) => [...s.reqs, ...s.unconditional]))
  let k = 0
  const records = shaped.map((s, index) => {
    const lls = s.reqs.map(() => scores[k++]!.logprob)
    const uncond = s.unconditional.map(() => scores[k++]!.logprob)
    const mi = mutualInfo ? argmax(lls.map((ll, i) => ll - uncond[i]!)) : undefined
    return {
      index,
      context: multi ? null : s.reqs[0]!.context,
      choices: s.ch,
      gold: s.gold,
      loglikelihoods: lls,
      ...scoreChoices(lls, s.ch, s.gold),
      ...(mi !== undefined
        ? { unconditionalLoglikelihoods: uncond, predMutualInfo: mi, accMutualInfo: mi === s.gold ? 1 : 0 }
        : {}),
    }
  })
  const mis = records.map((r) => r.accMutualInfo ?? 0)
  const metrics = multipleChoiceMetrics(records)
  metrics.set('acc_mutual_info', { metric: 'acc_mutual_info', value: mean(mis), stderr: meanStderr(mis) })
  return { records, metrics }
}

async function loglikelihood(model: LanguageModel, t: LmEvalTask, docs: readonly Doc[]): Promise<Out> {
  const pre = prefixes(t, docs)
  const reqs = docs.map((doc, i) =>
    splitBoundary(
      pre[i]! + String(value(t.docToText, doc, `${where(t)}: doc_to_text of document ${i}`)),
      String(value(t.docToTarget, doc, `${where(t)}: doc_to_target of document ${i}`)),
    ),
  )
  const scores = await model.loglikelihood(reqs)
  const records = reqs.map((r, index) => ({
    index,
    context: r.context,
    continuation: r.continuation,
    loglikelihood: scores[index]!.logprob,
    isGreedy: scores[index]!.greedy,
  }))
  const lls = records.map((r) => r.loglikelihood),
    greedy = records.map((r) => (r.isGreedy ? 1 : 0))
  const ppl = Math.exp(-mean(lls))
  return {
    records,
    metrics: new Map([
      ['perplexity', { metric: 'perplexity', value: ppl, stderr: ppl * meanStderr(lls) }],
      ['acc', { metric: 'acc', value: mean(greedy), stderr: meanStderr(greedy) }],
    ]),
  }
}

async function rolling(model: LanguageModel, t: LmEvalTask, docs: readonly Doc[]): Promise<Out> {
  const texts = docs.map((doc, i) => String(value(t.docToTarget, doc, `${where(t)}: doc_to_target of document ${i}`)))
  const scores = await model.loglikelihood(texts.map((text) => ({ context: '\n', continuation: text })))
  const records = texts.map((text, index) => ({
    index,
    bytes: utf8Length(text),
    words: text.split(/\s+/).length,
    loglikelihood: scores[index]!.logprob,
  }))
  const nll = records.map((r) => -r.loglikelihood)
  const perWord = ratioWithStderr(
    nll,
    records.map((r) => r.words),
  )
  const perByte = ratioWithStderr(
    nll,
    records.map((r) => r.bytes),
  )
  const bpb = { value: perByte.value / Math.LN2, stderr: perByte.stderr / Math.LN2 }
  return {
    records,
    metrics: new Map([
      [
        'word_perplexity',
        { metric: 'word_perplexity', value: Math.exp(perWord.value), stderr: Math.exp(perWord.value) * perWord.stderr },
      ],
      [
        'byte_perplexity',
        { metric: 'byte_perplexity', value: Math.exp(perByte.value), stderr: Math.exp(perByte.value) * perByte.stderr },
      ],
      ['bits_per_byte', { metric: 'bits_per_byte', ...bpb }],
    ]),
  }
}

/** Metric names in result order: `metric_list` order; with `filter_list`, `metric,pipeline` for each pipeline. */
export function lmEvalMetricNames(t: LmEvalTask): string[] {
  if (!t.filters) return t.metrics.map((m) => m.metric)
  return t.filters.flatMap((f) => t.metrics.map((m) => `${m.metric},${f.name}`))
}

async function generateUntil(model: LanguageModel, t: LmEvalTask, docs: readonly Doc[]): Promise<Out> {
  const pre = prefixes(t, docs)
  const ctx = docs.map(
    (doc, i) => pre[i]! + String(value(t.docToText, doc, `${where(t)}: doc_to_text of document ${i}`)),
  )
  // Each document's accepted answers: a list target (several answers) scores when any matches, as lm-eval's
  // multiple targets do.
  const targets = docs.map((doc, i): string[] => {
    const v = listLiteral(value(t.docToTarget, doc, `${where(t)}: doc_to_target of document ${i}`))
    // With choices the target is an index into them, as the harness reads it.
    if (t.docToChoice !== undefined) {
      const ch = choicesOf(t.docToChoice, doc, `${where(t)}: doc_to_choice of document ${i}`) as unknown[]
      return [String(ch[asIndex(v) ?? -1] ?? v)]
    }
    return Array.isArray(v) ? v.map(String) : [String(v)]
  })
  const outs = await model.generate(ctx.map((context) => ({ context, maxTokens: t.maxGenTokens })))
  const em = t.metrics.find((m) => m.metric === 'exact_match') ?? {
    ignoreCase: false,
    ignorePunctuation: false,
    regexesToIgnore: [],
  }
  const records = outs.map((generated, index) => {
    let end = generated.length
    for (const u of t.until) {
      const at = generated.indexOf(u)
      if (at >= 0 && at < end) end = at
    }
    const cut = generated.slice(0, end)
    const golds = targets[index]!
    const score = (pred: string) => Math.max(...golds.map((g) => exactMatchScore(pred, g, em)))
    const base = { index, context: ctx[index], target: golds.length === 1 ? golds[0] : golds, generated }
    if (!t.filters) {
      const prediction = cut.trim()
      return { ...base, prediction, exactMatch: score(prediction) }
    }
    const filtered: Record<string, string> = {}
    const exactMatch: Record<string, number> = {}
    for (const f of t.filters) {
      const v = applyFilter(f, [cut])
      // A pipeline without take_first leaves a list of responses; there is one here.
      filtered[f.name] = String(Array.isArray(v) ? v[0] : v)
      exactMatch[f.name] = score(filtered[f.name]!)
    }
    return { ...base, prediction: cut, filtered, exactMatch }
  })
  const metrics = new Map<string, MetricValue>()
  if (!t.filters) {
    const e = records.map((r) => r.exactMatch as number)
    metrics.set('exact_match', { metric: 'exact_match', value: mean(e), stderr: meanStderr(e) })
  } else
    for (const f of t.filters) {
      const e = records.map((r) => (r.exactMatch as Record<string, number>)[f.name]!)
      const name = `exact_match,${f.name}`
      metrics.set(name, { metric: name, value: mean(e), stderr: meanStderr(e) })
    }
  return { records, metrics }
}

/** Evaluate an lm-eval task; metrics come in `metric_list` order. */
export async function runLmEvalTask(model: LanguageModel, t: LmEvalTask, limit = Infinity): Promise<TaskResult> {
  const docs = t.docs.slice(0, limit)
  const run = {
    multiple_choice: multipleChoice,
    loglikelihood,
    loglikelihood_rolling: rolling,
    generate_until: generateUntil,
  }[t.outputType]
  const out = await run(model, t, docs)
  return {
    task: t.name,
    kind: t.outputType,
    model: model.description,
    samples: out.records.length,
    metrics: lmEvalMetricNames(t).map((m) => out.metrics.get(m)!),
    records: out.records,
  }
}
