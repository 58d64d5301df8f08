/**
 * @module Pre-tokenization: the regular expression that splits text into the pieces
 * BPE merges within (merges never cross a piece boundary).
 */

/** GPT-2's pattern: contractions, letters, numbers and other runs, each with an optional leading space. */
export const GPT2_PATTERN = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

/** Compiles a pre-tokenization pattern with the flags it needs (`g`, `u`). */
export function compilePattern(pattern: string): RegExp {
  return new RegExp(pattern, 'gu')
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
