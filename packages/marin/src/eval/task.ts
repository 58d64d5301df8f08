/** @module Evaluation tasks: multiple choice, generation with exact match, perplexity; read from JSONL task files. */
import { readFile } from 'node:fs/promises'
import { basename } from 'node:path'
import { z } from 'zod'
import { MarinError } from '../errors.js'

/** `{context, choices, gold}`: gold is the index of the right choice. */
export const MultipleChoiceItem = z.strictObject({
  context: z.string().min(1),
  choices: z.array(z.string().min(1)).min(2),
  gold: z.number().int().nonnegative(),
})
/** `{context, answer}`: greedy generation, cut at the first stop sequence, must equal the answer (both trimmed). */
export const GenerationItem = z.strictObject({
  context: z.string().min(1),
  answer: z.string(),
  /** @default ['\n'] */
  stop: z.array(z.string().min(1)).optional(),
  /** @default 32 */
  maxTokens: z.number().int().positive().optional(),
})
/** `{text}`: a held-out document scored for bits per byte (after a one-newline context). */
export const PerplexityItem = z.strictObject({ text: z.string().min(1) })

export type MultipleChoiceItem = z.output<typeof MultipleChoiceItem>
export type GenerationItem = z.output<typeof GenerationItem>
export type PerplexityItem = z.output<typeof PerplexityItem>

export const TASK_KINDS = ['multiple_choice', 'generation', 'perplexity'] as const
export type TaskKind = (typeof TASK_KINDS)[number]

/** A task: a name, its kind and its items (plain data). */
export type EvalTask =
  | { readonly name: string; readonly kind: 'multiple_choice'; readonly items: readonly MultipleChoiceItem[] }
  | { readonly name: string; readonly kind: 'generation'; readonly items: readonly GenerationItem[] }
  | { readonly name: string; readonly kind: 'perplexity'; readonly items: readonly PerplexityItem[] }

function kindOf(row: Record<string, unknown>): TaskKind | undefined {
  if ('choices' in row) return 'multiple_choice'
  if ('answer' in row) return 'generation'
  if ('text' in row) return 'perplexity'
  return undefined
}

/**
 * Parse JSONL task text; the kind comes from the first line's fields and every line must match it.
 * @param source names the file in errors
 */
export function parseTaskJsonl(text: string, name: string, source: string): EvalTask {
  const lines = text
    .split('\n')
    .map((l, i) => [l.trim(), i + 1] as const)
    .filter(([l]) => l.length > 0)
  if (lines.length === 0)
    throw new MarinError('BAD_CONFIG', `task file ${source}: no items; write one JSON object per line`)
  let kind: TaskKind | undefined
  const items: unknown[] = []
  for (const [line, no] of lines) {
    let row: unknown
    try {
      row = JSON.parse(line)
    } catch {
      throw new MarinError('BAD_CONFIG', `task file ${source}:${no}: not valid JSON; write one JSON object per line`)
    }
    if (typeof row !== 'object' || row === null || Array.isArray(row))
      throw new MarinError('BAD_CONFIG', `task file ${source}:${no}: expected a JSON object`)
    const k = kindOf(row as Record<string, unknown>)
    if (!k)
      throw new MarinError(
        'BAD_CONFIG',
        `task file ${source}:${no}: cannot tell the task kind; give ` +
          `{context, choices, gold}, {context, answer} or {text}`,
      )
    kind ??= k
    if (k !== kind)
      throw new MarinError(
        'BAD_CONFIG',
        `task file ${source}:${no}: a ${k} item in a ${kind} task; keep one kind per file`,
      )
    const schema =
      kind === 'multiple_choice' ? MultipleChoiceItem : kind === 'generation' ? GenerationItem : PerplexityItem
    const parsed = schema.safeParse(row)
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!
      throw new MarinError(
        'BAD_CONFIG',
        `task file ${source}:${no}: field "${issue.path.join('.') || '(line)'}": ${issue.message}`,
      )
    }
    if (kind === 'multiple_choice') {
      const mc = parsed.data as MultipleChoiceItem
      if (mc.gold >= mc.choices.length)
        throw new MarinError(
          'BAD_CONFIG',
          `task file ${source}:${no}: field "gold": ${mc.gold} is not an ` +
            `index of the ${mc.choices.length} choices`,
        )
    }
    items.push(parsed.data)
  }
  return { name, kind: kind!, items } as EvalTask
}

/** Read a JSONL task file; the task is named after the file (without `.jsonl`) unless `name` is given. */
export async function readTaskFile(path: string, name?: string): Promise<EvalTask> {
  let text: string
  try {
    text = await readFile(path, 'utf8')
  } catch (err) {
    throw new MarinError(
      'BAD_CONFIG',
      `task file ${path}: cannot read it (` +
        `${(err as NodeJS.ErrnoException).code ?? (err as Error).message}` +
        `); check the path`,
      { cause: err },
    )
  }
  return parseTaskJsonl(text, name ?? basename(path).replace(/\.jsonl$/, ''), path)
}

/** The task as JSONL text (one item per line), the format `readTaskFile` reads. */
export function taskToJsonl(task: EvalTask): string {
  return task.items.map((i) => JSON.stringify(i)).join('\n') + '\n'
}
