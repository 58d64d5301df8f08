/** @module sha256 while bytes flow: the hash of an upload, and the check of a download. */
import { createHash } from 'node:crypto'
import { Transform, type TransformCallback } from 'node:stream'
import { WorkerHash } from './hash-worker.js'

export const HASH_RE = /^[0-9a-f]{64}$/

export const sha256Hex = (data: Uint8Array): string => createHash('sha256').update(data).digest('hex')

// Bytes a stream may run ahead of its hash; bounds the memory of the worker's queue.
const AHEAD = 16 << 20
// Buffer a few large chunks on each side so that reading, hashing and writing overlap.
const BUFFERED = { highWaterMark: 4 << 20 }

/**
 * Passes bytes through unchanged and hashes them on the hash worker; `digest()`
 * resolves after the stream ended. Chunks go downstream without waiting for the
 * hash, so hashing and writing overlap.
 */
export class HashingTransform extends Transform {
  readonly #hash = new WorkerHash()
  #size = 0
  #digest: Promise<string> | undefined

  constructor() {
    super(BUFFERED)
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.#hash.update(chunk)
    this.#size += chunk.length
    this.push(chunk)
    if (this.#hash.pending <= AHEAD) cb()
    else this.#hash.drain(AHEAD / 2).then(() => cb(), cb)
  }

  override _flush(cb: TransformCallback): void {
    this.#digest = this.#hash.digest()
    this.#digest.then(() => cb(), cb)
  }

  override _destroy(err: Error | null, cb: (error?: Error | null) => void): void {
    if (!this.#digest) this.#hash.discard()
    cb(err)
  }

  get size(): number {
    return this.#size
  }

  /** The hex sha256 of everything that passed; only after the stream finished. */
  digest(): Promise<string> {
    if (!this.#digest) throw new Error('HashingTransform.digest() called before the stream ended')
    return this.#digest
  }
}

/**
 * Passes bytes through and, at the end, fails the stream with `onMismatch(actual)`
 * when their sha256 (or count) differs from what was expected. A consumer that
 * waits for the end (e.g. `pipeline`) therefore never accepts corrupt bytes.
 */
export class VerifyingTransform extends Transform {
  readonly #hash = new WorkerHash()
  #size = 0
  #done = false
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
    this.push(chunk)
    if (this.#hash.pending <= AHEAD) cb()
    else this.#hash.drain(AHEAD / 2).then(() => cb(), cb)
  }

  override _flush(cb: TransformCallback): void {
    this.#done = true
    this.#hash.digest().then((actual) => {
      if (actual !== this.expected || (this.expectedSize !== undefined && this.#size !== this.expectedSize)) cb(this.onMismatch(actual, this.#size))
      else cb()
    }, cb)
  }

  override _destroy(err: Error | null, cb: (error?: Error | null) => void): void {
    if (!this.#done) this.#hash.discard()
    cb(err)
  }
}
