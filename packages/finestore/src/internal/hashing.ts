/** @module sha256 while bytes flow: the hash of an upload, and the check of a download. */
import { createHash, type Hash } from 'node:crypto'
import { Transform, type TransformCallback } from 'node:stream'

export const HASH_RE = /^[0-9a-f]{64}$/

export const sha256Hex = (data: Uint8Array): string => createHash('sha256').update(data).digest('hex')

/** Passes bytes through unchanged and hashes them; read `digest()` after the stream ends. */
export class HashingTransform extends Transform {
  readonly #hash: Hash = createHash('sha256')
  #size = 0
  #digest: string | undefined

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.#hash.update(chunk)
    this.#size += chunk.length
    cb(null, chunk)
  }

  get size(): number {
    return this.#size
  }

  digest(): string {
    this.#digest ??= this.#hash.digest('hex')
    return this.#digest
  }
}

/**
 * Passes bytes through and, at the end, fails the stream with `onMismatch(actual)`
 * when their sha256 (or count) differs from what was expected. A consumer that
 * waits for the end (e.g. `pipeline`) therefore never accepts corrupt bytes.
 */
export class VerifyingTransform extends Transform {
  readonly #hash: Hash = createHash('sha256')
  #size = 0
  constructor(
    private readonly expected: string,
    private readonly expectedSize: number | undefined,
    private readonly onMismatch: (actual: string, actualSize: number) => Error,
  ) {
    super()
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.#hash.update(chunk)
    this.#size += chunk.length
    cb(null, chunk)
  }

  override _flush(cb: TransformCallback): void {
    const actual = this.#hash.digest('hex')
    if (actual !== this.expected || (this.expectedSize !== undefined && this.#size !== this.expectedSize)) {
      cb(this.onMismatch(actual, this.#size))
    } else cb()
  }
}
