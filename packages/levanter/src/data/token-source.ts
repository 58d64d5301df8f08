/**
 * @module The data contract: a flat stream of token ids. datakit's token caches implement
 * {@link TokenSource}; `InMemoryTokenSource` is the reference implementation.
 */
import { LevanterError } from '../errors.js'

/**
 * A read-only array of token ids, as a datakit cache exposes it.
 * - `numTokens`: total ids in the stream (documents concatenated, each ended by the EOS id).
 * - `read(start, length)`: ids [start, start+length) as an Int32Array (sync or async).
 * - `numBytes` (optional): UTF-8 bytes of the text the ids came from, for bits-per-byte.
 */
export interface TokenSource {
  readonly numTokens: number
  readonly numBytes?: number
  read(start: number, length: number): Int32Array | Promise<Int32Array>
}

/** A {@link TokenSource} over an array already in memory. */
export class InMemoryTokenSource implements TokenSource {
  readonly numTokens: number
  constructor(
    readonly tokens: Uint16Array | Uint32Array | Int32Array | readonly number[],
    readonly numBytes?: number,
  ) {
    this.numTokens = tokens.length
  }
  read(start: number, length: number): Int32Array {
    if (start < 0 || start + length > this.numTokens) {
      throw new LevanterError(
        'BAD_DATA',
        `read [${start}, ${start + length}) is outside the ${this.numTokens} tokens of the source`,
      )
    }
    const out = new Int32Array(length)
    for (let i = 0; i < length; i++) out[i] = this.tokens[start + i]!
    return out
  }
}
