/**
 * @module Pre-tokenization: the regular expression that splits text into the pieces
 * BPE merges within (merges never cross a piece boundary).
 */

/** GPT-2's pattern: contractions, letters, numbers and other runs, each with an optional leading space. */
export const GPT2_PATTERN = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

/** Llama 3's pattern (also tiktoken's cl100k): case-insensitive contractions, letters with one leading non-letter,
 * numbers of up to three digits. */
export const LLAMA3_PATTERN =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*" +
  '|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+'

/**
 * Rewrites `(?i:…)` groups (Rust and Python regex syntax, which JavaScript lacks) into plain groups
 * where each ASCII letter matches either case: `(?i:'s)` → `(?:'[sS])`. Escapes are kept as they are.
 */
export function expandCaseInsensitiveGroups(pattern: string): string {
  let out = ''
  let i = 0
  while (i < pattern.length) {
    if (pattern[i] === '\\') {
      out += pattern.slice(i, i + 2)
      i += 2
      continue
    }
    if (!pattern.startsWith('(?i:', i)) {
      out += pattern[i++]
      continue
    }
    out += '(?:'
    i += 4
    let depth = 1,
      inClass = false
    while (i < pattern.length && depth > 0) {
      const c = pattern[i]!
      if (c === '\\') {
        out += pattern.slice(i, i + 2)
        i += 2
        continue
      }
      const letter = /[a-zA-Z]/.test(c)
      if (inClass) {
        // a letter in a class gains its other case; a range a-z gains A-Z after it
        if (c === ']') inClass = false
        if (letter && pattern[i + 1] === '-' && /[a-zA-Z]/.test(pattern[i + 2] ?? '')) {
          out += `${c}-${pattern[i + 2]}${swapCase(c)}-${swapCase(pattern[i + 2]!)}`
          i += 3
          continue
        }
        out += letter ? c + swapCase(c) : c
      } else {
        if (c === '[') inClass = true
        if (c === '(') depth++
        if (c === ')') depth--
        out += letter ? `[${c}${swapCase(c)}]` : c
      }
      i++
    }
    if (depth > 0) throw new SyntaxError(`unterminated (?i: group in ${JSON.stringify(pattern)}`)
  }
  return out
}

const swapCase = (c: string) => (c === c.toLowerCase() ? c.toUpperCase() : c.toLowerCase())

/** Compiles a pre-tokenization pattern with the flags it needs (`g`, `u`); `(?i:…)` groups are expanded. */
export function compilePattern(pattern: string): RegExp {
  return new RegExp(expandCaseInsensitiveGroups(pattern), 'gu')
}

/**
 * The pieces of `text` in order. They always concatenate back to `text`: any
 * stretch the pattern does not match becomes a piece of its own, so no byte is lost.
 */
export function pretokenize(text: string, re: RegExp): string[] {
  // Fast path: one native match call. Ordered, non-overlapping matches whose lengths sum
  // to the text's length cover it without gaps, so they are the pieces.
  const all = text.match(re)
  if (all !== null) {
    let n = 0
    let empty = false
    for (let i = 0; i < all.length; i++) {
      n += all[i]!.length
      if (all[i]!.length === 0) empty = true
    }
    if (n === text.length && !empty) return all
  } else if (text.length === 0) {
    return []
  }
  const out: string[] = []
  let last = 0
  re.lastIndex = 0
  for (let m = re.exec(text); m !== null; m = re.exec(text)) {
    if (m[0].length === 0) {
      re.lastIndex++
      continue
    }
    if (m.index > last) out.push(text.slice(last, m.index))
    out.push(m[0])
    last = m.index + m[0].length
  }
  if (last < text.length) out.push(text.slice(last))
  return out
}
