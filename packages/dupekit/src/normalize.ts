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
// biome-ignore lint/suspicious/noControlCharactersInRegex: the range is all of ASCII, control characters included
const NON_ASCII = /[^\x00-\x7f]/

/** Exactly JavaScript's `\s`: WhiteSpace and LineTerminator code units. */
function isSpace(c: number): boolean {
  if (c > 32 && c < 0xa0) return false
  return (
    c === 32 ||
    (c >= 9 && c <= 13) ||
    c === 0xa0 ||
    c === 0x1680 ||
    (c >= 0x2000 && c <= 0x200a) ||
    c === 0x2028 ||
    c === 0x2029 ||
    c === 0x202f ||
    c === 0x205f ||
    c === 0x3000 ||
    c === 0xfeff
  )
}

/**
 * Collapses whitespace runs to one space and trims, in one scan that copies only
 * when something changes (a regex replace costs several times more on typical text).
 */
export function collapseWhitespace(t: string): string {
  const n = t.length
  let out = ''
  let last = 0
  let i = 0
  while (i < n) {
    if (!isSpace(t.charCodeAt(i))) {
      i++
      continue
    }
    let j = i + 1
    while (j < n && isSpace(t.charCodeAt(j))) j++
    const edge = i === 0 || j === n
    if (edge || j - i > 1 || t.charCodeAt(i) !== 32) {
      out += t.slice(last, i)
      if (!edge) out += ' '
      last = j
    }
    i = j
  }
  return last === 0 ? t : out + t.slice(last)
}

/**
 * The part of `normalizeText` that the MinHash kernels cannot do: NFKC and full
 * lower-casing for text with non-ASCII characters, and punctuation removal. The
 * kernels then fold ASCII case and collapse whitespace as they decode, which gives
 * shingles identical to those of `normalizeText(text)` at a fraction of the cost.
 */
export function normalizeForKernels(text: string, options: NormalizeOptions = {}): string {
  let t = NON_ASCII.test(text) ? text.normalize('NFKC').toLowerCase() : text
  if (options.stripPunctuation) t = t.replace(PUNCTUATION, '')
  return t
}

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
  return collapseWhitespace(t)
}
