/**
 * @module A duplex stream around a decoder that decodes only when its reader asks.
 *
 * A compressed file may expand a millionfold (a zstd or bzip2 "bomb"). A
 * transform that decodes each input chunk whole and pushes everything holds
 * the whole expansion in memory; here input is taken only when the decoder
 * has nothing left to give, and output is made one bounded chunk per read,
 * so memory stays a small multiple of the read buffer whatever the ratio.
 */
import { Duplex } from 'node:stream'

/** What a decoder throws when its input ends inside a frame or block: the file was cut short. */
export class TruncatedInput extends Error {
  override name = 'TruncatedInput'
}

/** A decoder driven from outside: fed input, asked for output. */
export interface PullDecoder {
  /** Appends input; nothing is decoded yet. */
  feed(chunk: Buffer): void
  /**
   * The next decoded bytes (a bounded amount, possibly empty), `undefined`
   * when more input is needed first, or `null` once `ended` input is fully
   * decoded. Throws on bad or (with `ended`) cut input.
   */
  pull(ended: boolean): Buffer | undefined | null
}

/** Holds each write until the decoder needs input again: the writer's backpressure is the reader's. */
export class PullStream extends Duplex {
  private wanting = false
  private ended = false
  private pumping = false
  private writeDone: ((err?: Error | null) => void) | undefined
  private finalDone: ((err?: Error | null) => void) | undefined

  constructor(private readonly decoder: PullDecoder) {
    super({ writableHighWaterMark: 1, readableHighWaterMark: 1 << 16 })
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    this.decoder.feed(chunk)
    this.writeDone = cb
    this.pump()
  }

  override _final(cb: (err?: Error | null) => void): void {
    this.ended = true
    this.finalDone = cb
    this.pump()
  }

  override _read(): void {
    this.wanting = true
    this.pump()
  }

  private pump(): void {
    // push() and a write's callback may call back in (_read, _write, _final); the loop below sees their state
    if (this.pumping) return
    this.pumping = true
    try {
      while (this.wanting && !this.destroyed) {
        let out: Buffer | undefined | null
        try {
          out = this.decoder.pull(this.ended)
        } catch (err) {
          this.destroy(err as Error)
          return
        }
        if (out === undefined) {
          const cb = this.writeDone
          this.writeDone = undefined
          // nothing to ask for: a write or the end will pump again
          if (!cb) return
          // this may write more or end the input at once, inside this loop: look again
          cb()
          continue
        }
        if (out === null) {
          this.wanting = false
          this.push(null)
          const cb = this.finalDone
          this.finalDone = undefined
          cb?.()
          return
        }
        if (out.length > 0) this.wanting = this.push(out)
      }
    } finally {
      this.pumping = false
    }
  }
}

/** Unread input bytes as a queue of chunks. */
export class ByteQueue {
  private chunks: Buffer[] = []
  private offset = 0
  length = 0

  push(chunk: Buffer): void {
    if (chunk.length === 0) return
    this.chunks.push(chunk)
    this.length += chunk.length
  }

  /** The byte at `i` from the front (`i < length`). */
  at(i: number): number {
    let k = 0
    let j = i + this.offset
    while (j >= this.chunks[k]!.length) j -= this.chunks[k++]!.length
    return this.chunks[k]![j]!
  }

  /** Removes and returns the first `n` bytes (`n <= length`). */
  take(n: number): Buffer {
    const first = this.chunks[0]
    if (first && first.length - this.offset >= n) {
      const out = first.subarray(this.offset, this.offset + n)
      this.drop(n)
      return out
    }
    const out = Buffer.allocUnsafe(n)
    let filled = 0
    while (filled < n) {
      const c = this.chunks[0]!
      const k = Math.min(n - filled, c.length - this.offset)
      c.copy(out, filled, this.offset, this.offset + k)
      filled += k
      this.drop(k)
    }
    return out
  }

  /** Removes the first `n` bytes (`n <= length`). */
  drop(n: number): void {
    this.length -= n
    while (n > 0) {
      const c = this.chunks[0]!
      const k = Math.min(n, c.length - this.offset)
      this.offset += k
      n -= k
      if (this.offset === c.length) {
        this.chunks.shift()
        this.offset = 0
      }
    }
  }
}
