/**
 * @module Text normalization for dedup keys and shingles.
 *
 * The rules, applied in this order (stable: changing them changes every key):
 * 1. Unicode NFKC (compatibility forms fold: `ﬁ` → `fi`, full-width `Ａ` → `A`, `①` → `1`).
 * 2. Lower case, locale-independent (`String.prototype.toLowerCase`).
 * 3. Optionally, remove punctuation and symbols: every code point of Unicode
 *    categories P* and S* (this covers all of ASCII's `!"#$%&'()*+,-./:;<=>?@[\]^_`{|}~`).
 * 4. Collapse each run of whitespace (JavaScript `\s`: Unicode spaces, tabs, line
 *    breaks, BOM) to one ASCII space, and trim both ends.
 */

export type NormalizeOptions = {
  /** Remove punctuation and symbols (Unicode P* and S*) before collapsing whitespace. @default false */
  stripPunctuation?: boolean
}

const PUNCTUATION = /[\p{P}\p{S}]+/gu
// Only rewrite what changes: a lone ASCII space is already normal.
const WHITESPACE = /\s{2,}|[\t\n\v\f\r\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]/g
const NON_ASCII = /[^\x00-\x7f]/

/**
 * Normalizes `text` for dedup: NFKC, lower case, optional punctuation removal,
 * whitespace collapsed and trimmed.
 *
 * @example
 * normalizeText('  Ｈello,\n\tWORLD!  ')                          // 'hello, world!'
 * normalizeText('Hello, World!', { stripPunctuation: true })      // 'hello world'
 */
export function normalizeText(text: string, options: NormalizeOptions = {}): string {
  // ASCII is already NFKC; skipping the call saves a pass on most web text.
  let t = NON_ASCII.test(text) ? text.normalize('NFKC') : text
  t = t.toLowerCase()
  if (options.stripPunctuation) t = t.replace(PUNCTUATION, '')
  t = t.replace(WHITESPACE, ' ')
  // After the replace, runs are single spaces, but a single space may remain at the ends.
  if (t.length > 0 && (t.charCodeAt(0) === 32 || t.charCodeAt(t.length - 1) === 32)) t = t.trim()
  return t
}
