/**
 * @module Exact-dedup keys: the XXH3-128 of the normalized text, as 32 hex digits.
 *
 * Two documents get the same key exactly when their normalized texts are equal
 * (up to a 2^-128 collision chance), so the key is a safe group-by column for exact dedup.
 *
 * @example
 * exactKey('Hello,  World') === exactKey('hello, world') // true
 */
import { hashHex, xxh128Batch } from './hash.js'
import { normalizeText, type NormalizeOptions } from './normalize.js'

/** The exact-dedup key of one text. */
export function exactKey(text: string, options: NormalizeOptions = {}): string {
  return exactKeys([text], options)[0]!
}

/** Exact-dedup keys of many texts, hashed in one batch. */
export function exactKeys(texts: readonly string[], options: NormalizeOptions = {}): string[] {
  const h = xxh128Batch(texts.map((t) => normalizeText(t, options)))
  const out = new Array<string>(texts.length)
  for (let i = 0; i < texts.length; i++) out[i] = hashHex((h[2 * i + 1]! << 64n) | h[2 * i]!, 128)
  return out
}
