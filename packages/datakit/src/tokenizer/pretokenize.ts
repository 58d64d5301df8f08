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
