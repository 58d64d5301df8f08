/**
 * @module Added tokens (`tokenizer.json`'s `added_tokens`) and how they are found in a text, as Hugging Face
 * `tokenizers`' AddedVocabulary finds them: `single_word`, `lstrip`, `rstrip` and `normalized` included.
 */

/**
 * An added token (a `tokenizer.json` `added_tokens` entry), matched in the text before the model sees it, as
 * Hugging Face `tokenizers` does: the leftmost, longest content first, never overlapping.
 * - `special` (the default): a control token such as `<s>`, matched only with `specials: 'match'`;
 *   `special: false` tokens are always matched.
 * - `singleWord`: matched only where no word character (Unicode letters, marks, digits, connector
 *   punctuation) touches it on either side.
 * - `lstrip` / `rstrip`: the whitespace just before / after it is part of its match, so no token encodes it.
 * - `normalized`: matched in the normalized text (after the normalizer, with its content normalized too)
 *   instead of the original one. @default `!special`, as `tokenizers` has it
 */
export type SpecialToken = {
  id: number
  content: string
  special?: boolean
  singleWord?: boolean
  lstrip?: boolean
  rstrip?: boolean
  normalized?: boolean
}

/** The added tokens one pass looks for: an alternation of their contents, longest first, and the token of each. */
export type AddedMatcher = { re: RegExp; byContent: Map<string, SpecialToken> }
/** The two passes over a text: tokens matched in the original text, then those matched in the normalized one. */
export type AddedPasses = { original?: AddedMatcher; normalized?: AddedMatcher }
/** A piece of text between added tokens, or one added token with the text its match covers. */
export type AddedSplit = { start: number; text: string; token?: SpecialToken }

// Rust regex's Unicode \w and \s, which `tokenizers` uses for single_word and lstrip/rstrip (JavaScript's are ASCII).
const WORD_BEFORE = /[\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}]$/u
const WORD_AFTER = /^[\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}]/u
const SPACE = /^\p{White_Space}$/u

/** A matcher for `entries` (the content to look for, and its token); `undefined` when there is nothing to find. */
export function addedMatcher(entries: Iterable<readonly [string, SpecialToken]>): AddedMatcher | undefined {
  // `tokenizers` skips tokens with empty content; an empty alternative would match everywhere.
  const byContent = new Map<string, SpecialToken>()
  for (const [content, t] of entries) if (content && !byContent.has(content)) byContent.set(content, t)
  if (!byContent.size) return undefined
  // Longest first: a regex alternation takes the first alternative that matches, so this is leftmost-longest.
  const sorted = [...byContent.keys()].sort((x, y) => y.length - x.length)
  return { re: new RegExp(sorted.map((c) => c.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|'), 'g'), byContent }
}

/**
 * Cuts `text` at the added tokens `m` finds, as `tokenizers`' AddedVocabulary does: a `singleWord` match
 * touching a word character is passed over; `lstrip`/`rstrip` widen a match over the whitespace beside it
 * (never into the previous match). Pieces of text come back with their offset in `text`; empty ones are dropped.
 */
export function splitOnAdded(text: string, m: AddedMatcher | undefined): AddedSplit[] {
  if (!m) return text ? [{ start: 0, text }] : []
  const out: AddedSplit[] = []
  let offset = 0
  m.re.lastIndex = 0
  for (let hit = m.re.exec(text); hit !== null; hit = m.re.exec(text)) {
    const token = m.byContent.get(hit[0])!
    let start = hit.index
    let stop = start + hit[0].length
    if (token.singleWord) {
      // two code units before/after hold the whole neighbouring code point, surrogate pairs included
      const wordBefore = start > 0 && WORD_BEFORE.test(text.slice(Math.max(0, start - 2), start))
      const wordAfter = stop < text.length && WORD_AFTER.test(text.slice(stop, stop + 2))
      if (wordBefore || wordAfter) continue
    }
    // every White_Space character is a single UTF-16 code unit
    if (token.lstrip) while (start > offset && SPACE.test(text[start - 1]!)) start--
    if (token.rstrip) while (stop < text.length && SPACE.test(text[stop]!)) stop++
    if (offset < start) out.push({ start: offset, text: text.slice(offset, start) })
    out.push({ start, text: text.slice(start, stop), token })
    offset = stop
    // Go on after the stripped whitespace: a token starting inside it would overlap this one.
    m.re.lastIndex = stop
  }
  if (offset < text.length) out.push({ start: offset, text: text.slice(offset) })
  return out
}
