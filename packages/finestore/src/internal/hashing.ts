/**
 * @module sha256 while bytes flow: the hash of an upload, and the check of a download.
 *
 * Chunks are hashed on this thread as they pass. Handing them to a worker thread
 * would need a copy of each chunk (it also goes downstream), and on this kind of
 * CPU (SHA extensions) that copy costs about as much as hashing it.
 */
import { createHash, type Hash } from 'node:crypto'
import { Transform, type TransformCallback } from 'node:stream'

export const HASH_RE = /^[0-9a-f]{64}$/

export const sha256Hex = (data: Uint8Array): string => createHash('sha256').update(data).digest('hex')

// Keep a few chunks on each side so that the source, the hashing and the sink overlap.
const BUFFERED = { highWaterMark: 2 << 20 }

/** Passes bytes through unchanged and hashes them; `digest()` is available once the stream ended. */
export class HashingTransform extends Transform {
  readonly #hash: Hash = createHash('sha256')
  #size = 0
  #digest: string | undefined

  constructor() {
    super(BUFFERED)
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.#hash.update(chunk)
    this.#size += chunk.length
    cb(null, chunk)
  }

  override _flush(cb: TransformCallback): void {
    this.#digest = this.#hash.digest('hex')
    cb()
  }

  get size(): number {
    return this.#size
  }

  /** The hex sha256 of everything that passed; only after the stream finished. */
  digest(): string {
    if (this.#digest === undefined) throw new Error('HashingTransform.digest() called before the stream ended')
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
    super(BUFFERED)
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.#hash.update(chunk)
    this.#size += chunk.length
    cb(null, chunk)
  }

  override _flush(cb: TransformCallback): void {
    const actual = this.#hash.digest('hex')
    if (actual !== this.expected || (this.expectedSize !== undefined && this.#size !== this.expectedSize))
      cb(this.onMismatch(actual, this.#size))
    else cb()
  }
}
