/**
 * @module lm-evaluation-harness `filter_list` for `generate_until` tasks: named pipelines of
 * filters applied to each document's responses (a list: one response per repeat) before scoring;
 * each pipeline scores separately, its metrics named `metric,pipeline` as the harness names them.
 *
 * Filters: `regex` (`regex_pattern`, `group_select` (negative counts from the end), `fallback`:
 * Python's `re.findall`, a match with several groups gives its first non-empty group, the result
 * stripped, `fallback` (default `[invalid]`) when nothing matches), `take_first`, `take_first_k`
 * (`k`), `remove_whitespace` (strip), `lowercase`, `uppercase`, `majority_vote` (the most common
 * response, the first seen among ties). Python patterns become JavaScript ones: leading inline flags
 * (`(?s)`, `(?i)`, `(?m)`) become flags, `(?P<name>…)` a named group, `(?P=name)` a back-reference.
 * Patterns come from task files, so they run with a time budget (`regex-sandbox.ts`): one that backtracks
 * without bound is refused, naming the task, the field and the pattern.
 */
import { z } from 'zod'
import { MarinError } from '../errors.js'
import { findallBounded, stripBounded } from './regex-sandbox.js'
import type { SandboxedRegex } from './regex-sandbox.js'

export type FilterStep =
  | { readonly fn: 'regex'; readonly regex: SandboxedRegex; readonly groupSelect: number; readonly fallback: string }
  | { readonly fn: 'take_first' | 'remove_whitespace' | 'lowercase' | 'uppercase' | 'majority_vote' }
  | { readonly fn: 'take_first_k'; readonly k: number }

/** A named pipeline of filters. */
export type LmEvalFilter = { readonly name: string; readonly steps: readonly FilterStep[] }

export const LM_EVAL_FILTERS = [
  'regex',
  'take_first',
  'take_first_k',
  'remove_whitespace',
  'lowercase',
  'uppercase',
  'majority_vote',
] as const

/** A Python `re` pattern as a JavaScript RegExp (with `extraFlags`); errors name `what`. */
export function pythonRegex(pattern: string, extraFlags: string, what: string): RegExp {
  let src = pattern
  let flags = extraFlags
  const inline = /^\(\?([aiLmsux]+)\)/.exec(src)
  if (inline) {
    for (const f of inline[1]!) {
      if (f === 's' || f === 'i' || f === 'm') flags += flags.includes(f) ? '' : f
      else if (f !== 'u')
        throw new MarinError(
          'BAD_CONFIG',
          `${what}: the inline flag (?${f}) of ${JSON.stringify(pattern)} is not supported`,
        )
    }
    src = src.slice(inline[0].length)
  }
  src = src.replace(/\(\?P<(\w+)>/g, '(?<$1>').replace(/\(\?P=(\w+)\)/g, '\\k<$1>')
  try {
    return new RegExp(src, flags)
  } catch (err) {
    throw new MarinError(
      'BAD_CONFIG',
      `${what}: ${JSON.stringify(pattern)} is not a valid pattern: ${(err as Error).message}`,
    )
  }
}

const Step = z.looseObject({
  function: z.string(),
  regex_pattern: z.string().optional(),
  group_select: z.number().int().optional(),
  fallback: z.string().optional(),
  k: z.number().int().positive().optional(),
})
export const FilterListConfig = z.array(z.looseObject({ name: z.string().min(1), filter: z.array(Step).min(1) }))

/** `filter_list` from task YAML, checked; `where` names the file in errors. */
export function parseFilterList(raw: z.output<typeof FilterListConfig>, where: string): LmEvalFilter[] {
  return raw.map((p, i) => ({
    name: p.name,
    steps: p.filter.map((s, j): FilterStep => {
      const what = `${where}: filter_list[${i}] (${p.name}) step ${j} (${s.function})`
      switch (s.function) {
        case 'regex': {
          const pattern = s.regex_pattern ?? '#### (\\-?[0-9\\.\\,]+)'
          return {
            fn: 'regex',
            regex: { re: pythonRegex(pattern, 'g', what), what: `${what} regex_pattern`, pattern },
            groupSelect: s.group_select ?? 0,
            fallback: s.fallback ?? '[invalid]',
          }
        }
        case 'take_first_k':
          if (s.k === undefined) throw new MarinError('BAD_CONFIG', `${what}: needs k`)
          return { fn: 'take_first_k', k: s.k }
        case 'take_first':
        case 'remove_whitespace':
        case 'lowercase':
        case 'uppercase':
        case 'majority_vote':
          return { fn: s.function }
        default:
          throw new MarinError(
            'BAD_CONFIG',
            `${where}: filter_list[${i}] (${p.name}): filter ${s.function} is not supported; ` +
              `use ${LM_EVAL_FILTERS.join(', ')}`,
          )
      }
    }),
  }))
}

function regexOne(step: Extract<FilterStep, { fn: 'regex' }>, resp: unknown): string {
  const text = typeof resp === 'string' ? resp : ''
  const matches = findallBounded(step.regex, text)
  if (matches.length === 0) return step.fallback
  let m = matches.at(step.groupSelect)
  if (m === undefined) return step.fallback
  if (Array.isArray(m)) {
    const first = m.find((g) => g !== '')
    if (first === undefined) return step.fallback
    m = first
  }
  return m.trim()
}

const each = (v: unknown, f: (s: string) => unknown) => (Array.isArray(v) ? v.map((x) => f(String(x))) : f(String(v)))

function majority(xs: readonly unknown[]): unknown {
  const counts = new Map<string, { v: unknown; n: number }>()
  for (const x of xs) {
    const key = JSON.stringify(x)
    const c = counts.get(key)
    if (c) c.n++
    else counts.set(key, { v: x, n: 1 })
  }
  let best: { v: unknown; n: number } | undefined
  for (const c of counts.values()) if (!best || c.n > best.n) best = c
  return best?.v
}

/** One document's responses through one pipeline: usually a string (after `take_first`), else a list. */
export function applyFilter(f: LmEvalFilter, responses: readonly string[]): unknown {
  let v: unknown = [...responses]
  for (const s of f.steps) {
    switch (s.fn) {
      case 'regex':
        v = Array.isArray(v) ? v.map((r) => regexOne(s, r)) : regexOne(s, v)
        break
      case 'take_first':
        v = Array.isArray(v) ? v[0] : v
        break
      case 'take_first_k':
        v = Array.isArray(v) ? v.slice(0, s.k) : v
        break
      case 'remove_whitespace':
        v = each(v, (x) => x.trim())
        break
      case 'lowercase':
        v = each(v, (x) => x.toLowerCase())
        break
      case 'uppercase':
        v = each(v, (x) => x.toUpperCase())
        break
      case 'majority_vote':
        v = Array.isArray(v) ? [majority(v)] : [v]
        break
    }
  }
  return v
}

/** `exact_match`'s options from `metric_list`. */
export type ExactMatchOptions = {
  readonly ignoreCase: boolean
  readonly ignorePunctuation: boolean
  readonly regexesToIgnore: readonly string[]
  /** How errors name the metric: the task file and `metric_list[i]`. @default 'metric_list' */
  readonly where?: string
}

const ignoreCache = new Map<string, SandboxedRegex>()

/** `regexes_to_ignore` as checked patterns; an invalid one is a BAD_CONFIG error naming `where` and its index. */
export function ignorePatterns(patterns: readonly string[], where = 'metric_list'): SandboxedRegex[] {
  return patterns.map((pattern, j) => {
    const what = `${where}: regexes_to_ignore[${j}]`
    const key = `${what}\0${pattern}`
    let r = ignoreCache.get(key)
    if (!r) ignoreCache.set(key, (r = { re: pythonRegex(pattern, 'g', what), what, pattern }))
    return r
  })
}

/**
 * lm-eval's `exact_match` for one prediction: `regexes_to_ignore` removed (Python patterns, time-bounded), then
 * case and ASCII punctuation if asked, from both sides; compared after trimming whitespace (the
 * harness compares untrimmed).
 */
export function exactMatchScore(pred: string, gold: string, m: ExactMatchOptions): number {
  const ignore = ignorePatterns(m.regexesToIgnore, m.where)
  const norm = (s: string) => {
    let x = stripBounded(ignore, s)
    if (m.ignoreCase) x = x.toLowerCase()
    if (m.ignorePunctuation) x = x.replace(/[!"#$%&'()*+,\-./:;<=>?@[\\\]^_`{|}~]/g, '')
    return x.trim()
  }
  return norm(pred) === norm(gold) ? 1 : 0
}
