/**
 * @module Run an lm-evaluation-harness task (see `lm-eval-task.ts`) with lm-eval's request shapes
 * and metrics: `multiple_choice` (one context, each choice after `target_delimiter`; or, with
 * multiple inputs, each choice as a context and one continuation), `loglikelihood`,
 * `generate_until` and `loglikelihood_rolling`. `doc_to_*` fields are Jinja templates rendered
 * with `@huggingface/jinja`, or column names, or constants, as lm-eval reads them.
 *
 * Differences from lm-eval: zero-shot only; `loglikelihood_rolling` conditions on a newline
 * instead of the end-of-text token; `exact_match` compares after trimming whitespace.
 */
import { Template } from '@huggingface/jinja'
import { MarinError } from '../errors.js'
import type { LanguageModel } from './language-model.js'
import { splitBoundary } from './language-model.js'
import type { Doc } from './lm-eval-functions.js'
import type { DocField, LmEvalMetric, LmEvalTask } from './lm-eval-task.js'
import type { MetricValue, TaskResult } from './run-task.js'
import { mean, meanStderr, ratioWithStderr, utf8Length } from './stats.js'

const templates = new Map<string, Template>()

/** Python list methods Jinja here lacks, rewritten to helper calls: `xs.index(v)` → `__index(xs, v)`. */
const pythonisms = (src: string) => src.replace(/([A-Za-z_][\w.]*(?:\[[^\]]*\])*)\.index\(/g, '__index($1, ')
const unwrap = (v: unknown): unknown =>
  typeof v === 'object' && v !== null && 'value' in v && 'type' in v ? unwrap((v as { value: unknown }).value) : v
const helpers = {
  __index: (xs: unknown, v: unknown) => {
    const arr = (unwrap(xs) as unknown[]).map(unwrap)
    const i = arr.indexOf(unwrap(v))
    if (i < 0) throw new Error(`${JSON.stringify(unwrap(v))} is not in the list ${JSON.stringify(arr)}`)
    return i
  },
}

function render(src: string, doc: Doc, what: string): string {
  let t = templates.get(src)
  if (!t) {
    try {
      t = new Template(pythonisms(src))
    } catch (err) {
      throw new MarinError('BAD_CONFIG', `${what}: not a valid Jinja template: ${(err as Error).message}`)
    }
    templates.set(src, t)
  }
  try {
    return t.render({ ...doc, ...helpers })
  } catch (err) {
    throw new MarinError('BAD_CONFIG', `${what}: rendering failed: ${(err as Error).message}`)
  }
}

/**
 * A `doc_to_*` field's value for one document, as lm-eval computes it: a column name gives the
 * column; a template that is one `{{ expression }}` gives the expression's value (lists stay
 * lists); any other template gives its text; constants and functions give themselves / their result.
 */
function value(f: DocField, doc: Doc, what: string): unknown {
  if (typeof f === 'function') return f(doc)
  if (typeof f !== 'string') return f
  if (Object.hasOwn(doc, f)) return doc[f]
  const single = /^\s*\{\{([\s\S]*)\}\}\s*$/.exec(f)
  if (single && !single[1]!.includes('}}') && !single[1]!.includes('{{'))
    return JSON.parse(render(`{{ (${single[1]}) | tojson }}`, doc, what)) as unknown
  return render(f, doc, what)
}

/** A target or text that names a choice: a number, or a string of digits (with `doc_to_choice` set). */
const asIndex = (v: unknown): number | undefined =>
  typeof v === 'number' ? v : typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : undefined

const argmax = (xs: readonly number[]) => xs.reduce((best, v, i) => (v > xs[best]! ? i : best), 0)

function exactMatch(pred: string, gold: string, m: LmEvalMetric): number {
  const norm = (s: string) => {
    let x = s
    for (const r of m.regexesToIgnore) x = x.replace(new RegExp(r, 'g'), '')
    if (m.ignoreCase) x = x.toLowerCase()
    if (m.ignorePunctuation) x = x.replace(/[!"#$%&'()*+,\-./:;<=>?@[\\\]^_`{|}~]/g, '')
    return x.trim()
  }
  return norm(pred) === norm(gold) ? 1 : 0
}

type Out = { records: Record<string, unknown>[]; metrics: Map<string, MetricValue> }

async function multipleChoice(model: LanguageModel, t: LmEvalTask, docs: readonly Doc[]): Promise<Out> {
  const what = (k: string, i: number) => `${t.source}: ${k} of document ${i}`
  const shaped = docs.map((doc, i) => {
    const text = value(t.docToText, doc, what('doc_to_text', i))
    const target = value(t.docToTarget, doc, what('doc_to_target', i))
    const choices = value(t.docToChoice!, doc, what('doc_to_choice', i))
    if (!Array.isArray(choices) || choices.length < 2)
      throw new MarinError(
        'BAD_CONFIG',
        `${what('doc_to_choice', i)}: expected a list of choices, got ${JSON.stringify(choices)}`,
      )
    const ch = choices.map(String)
    // Multiple inputs (Winogrande): the text is the gold index, each choice a context, the target the continuation.
    const multi = t.multipleInputs || asIndex(text) !== undefined
    const gold = multi ? asIndex(text) : (asIndex(target) ?? ch.indexOf(String(target)))
    if (gold === undefined || gold < 0 || gold >= ch.length)
      throw new MarinError(
        'BAD_CONFIG',
        `${what('doc_to_target', i)}: ${JSON.stringify(target)} is not one of the ${ch.length} choices`,
      )
    const prefix = t.description
    const reqs = multi
      ? ch.map((c) => splitBoundary(prefix + c, t.targetDelimiter + String(target)))
      : ch.map((c) => splitBoundary(prefix + String(text), t.targetDelimiter + c))
    return { ch, gold, reqs, multi, text }
  })
  const scores = await model.loglikelihood(shaped.flatMap((s) => s.reqs))
  let k = 0
  const records = shaped.map((s, index) => {
    const lls = s.reqs.map(() => scores[k++]!.logprob)
    // acc_norm: lm-eval divides by each choice's length in characters.
    const pred = argmax(lls),
      predNorm = argmax(lls.map((ll, i) => ll / Math.max(1, s.ch[i]!.length)))
    return {
      index,
      context: s.multi ? null : s.reqs[0]!.context,
      choices: s.ch,
      gold: s.gold,
      loglikelihoods: lls,
      pred,
      predNorm,
      acc: pred === s.gold ? 1 : 0,
      accNorm: predNorm === s.gold ? 1 : 0,
    }
  })
  const acc = records.map((r) => r.acc),
    norm = records.map((r) => r.accNorm)
  return {
    records,
    metrics: new Map([
      ['acc', { metric: 'acc', value: mean(acc), stderr: meanStderr(acc) }],
      ['acc_norm', { metric: 'acc_norm', value: mean(norm), stderr: meanStderr(norm) }],
    ]),
  }
}

async function loglikelihood(model: LanguageModel, t: LmEvalTask, docs: readonly Doc[]): Promise<Out> {
  const reqs = docs.map((doc, i) =>
    splitBoundary(
      t.description + String(value(t.docToText, doc, `${t.source}: doc_to_text of document ${i}`)),
      String(value(t.docToTarget, doc, `${t.source}: doc_to_target of document ${i}`)),
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
  const texts = docs.map((doc, i) => String(value(t.docToTarget, doc, `${t.source}: doc_to_target of document ${i}`)))
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

async function generateUntil(model: LanguageModel, t: LmEvalTask, docs: readonly Doc[]): Promise<Out> {
  const ctx = docs.map(
    (doc, i) => t.description + String(value(t.docToText, doc, `${t.source}: doc_to_text of document ${i}`)),
  )
  const targets = docs.map((doc, i) => String(value(t.docToTarget, doc, `${t.source}: doc_to_target of document ${i}`)))
  const outs = await model.generate(ctx.map((context) => ({ context, maxTokens: t.maxGenTokens })))
  const em = t.metrics.find((m) => m.metric === 'exact_match')
  const records = outs.map((generated, index) => {
    let end = generated.length
    for (const u of t.until) {
      const at = generated.indexOf(u)
      if (at >= 0 && at < end) end = at
    }
    const prediction = generated.slice(0, end).trim()
    const exact = em ? exactMatch(prediction, targets[index]!, em) : prediction === targets[index]!.trim() ? 1 : 0
    return { index, context: ctx[index], target: targets[index], generated, prediction, exactMatch: exact }
  })
  const e = records.map((r) => r.exactMatch)
  return {
    records,
    metrics: new Map([['exact_match', { metric: 'exact_match', value: mean(e), stderr: meanStderr(e) }]]),
  }
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
    metrics: t.metrics.map((m) => out.metrics.get(m.metric)!),
    records: out.records,
  }
}
