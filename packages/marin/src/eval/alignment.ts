/** @module Which tokens of a tokenized `context + continuation` belong to the continuation, from character offsets. */
import { MarinError } from '../errors.js'

/**
 * Indices of the tokens that overlap the continuation: a token whose text ends after
 * `contextLength` characters. `offsets[i]` is where token i starts (OpenAI `text_offset`),
 * `end` is the length of the whole text. The first token is never scored (nothing precedes
 * it), so a continuation that starts inside it is an error naming the request.
 */
export function continuationTokens(
  offsets: readonly number[],
  end: number,
  contextLength: number,
  what: string,
): number[] {
  const out: number[] = []
  for (let i = 0; i < offsets.length; i++) {
    const tokenEnd = i + 1 < offsets.length ? offsets[i + 1]! : end
    if (tokenEnd > contextLength) out.push(i)
  }
  if (out.length === 0)
    throw new MarinError(
      'BAD_CONFIG',
      `${what}: the continuation is empty after tokenization; give a non-empty continuation`,
    )
  if (out[0] === 0)
    throw new MarinError(
      'BAD_CONFIG',
      `${what}: the context is empty or shares the first token with ` +
        `the continuation; give a context of at least one token`,
    )
  return out
}
