/**
 * @module The spans sub-document dedup removes: paragraphs (separated by blank lines) and
 * lines. The dedup pass decides which spans go; the shard writer applies the same
 * decision with the same functions, so both see the same text.
 */

/** Removals decided for one document: paragraph indexes, then line indexes of what remains. */
export type SpanEdit = { readonly paragraphs?: readonly number[]; readonly lines?: readonly number[] }

const PARAGRAPH_BREAK = /\n[ \t]*(?:\n[ \t]*)+/

export function splitParagraphs(text: string): string[] {
  return text.split(PARAGRAPH_BREAK)
}

export function splitLines(text: string): string[] {
  return text.split('\n')
}

/** `text` without the paragraphs at `drop`; the rest joined by one blank line. */
export function dropParagraphs(text: string, drop: readonly number[]): string {
  const gone = new Set(drop)
  return splitParagraphs(text)
    .filter((_, i) => !gone.has(i))
    .join('\n\n')
    .trim()
}

/** `text` without the lines at `drop`; runs of blank lines left behind become one. */
export function dropLines(text: string, drop: readonly number[]): string {
  const gone = new Set(drop)
  return splitLines(text)
    .filter((_, i) => !gone.has(i))
    .join('\n')
    .replace(/\n[ \t]*(?:\n[ \t]*){2,}/g, '\n\n')
    .trim()
}

/** The text a document keeps after its edit. */
export function applySpanEdit(text: string, edit: SpanEdit | undefined): string {
  if (edit === undefined) return text
  let out = text
  if (edit.paragraphs?.length) out = dropParagraphs(out, edit.paragraphs)
  if (edit.lines?.length) out = dropLines(out, edit.lines)
  return out
}
