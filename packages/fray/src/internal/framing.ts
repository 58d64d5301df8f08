/**
 * @module Raw binary frames over a byte stream: a fixed header of u32 fields and a
 * payload of bytes. Typed arrays go on the wire as their own bytes (no JSON, no copy
 * on the sending side). `FrameReader` parses a socket's 'data' chunks (one copy into an
 * aligned buffer); `FrameSink` tells the socket where each read should land, so a payload
 * goes from the kernel straight into the receiver's own array.
 */
import type { Socket } from 'node:net'

/** Header fields after the payload length. */
export type FrameHeader = {
  /** Which communicator (mesh sub-group) or service. */
  comm: number
  /** Which operation in that communicator's sequence. */
  seq: number
  kind: number
  /** Chunk index within the operation. */
  chunk: number
  /** Sender's rank (or a request id). */
  from: number
  /** Total byte length of the whole operation's buffer: both sides must agree. */
  total: number
}

export const HEADER_BYTES = 28

/** Writes one frame; resolves when the bytes are handed to the kernel, so the caller may reuse its buffer. */
export function writeFrame(sock: Socket, h: FrameHeader, payload?: ArrayBufferView): Promise<void> {
  const head = Buffer.allocUnsafe(HEADER_BYTES)
  head.writeUInt32LE(payload ? payload.byteLength : 0, 0)
  head.writeUInt32LE(h.comm, 4)
  head.writeUInt32LE(h.seq, 8)
  head.writeUInt32LE(h.kind, 12)
  head.writeUInt32LE(h.chunk, 16)
  head.writeUInt32LE(h.from, 20)
  head.writeUInt32LE(h.total, 24)
  if (!payload || payload.byteLength === 0) {
    return new Promise((res, rej) => sock.write(head, (err) => (err ? rej(err) : res())))
  }
  sock.cork()
  sock.write(head)
  const body = Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength)
  const done = new Promise<void>((res, rej) => sock.write(body, (err) => (err ? rej(err) : res())))
  sock.uncork()
  return done
}

/** Incremental parser: feed it the socket's chunks, get whole frames back. */
export class FrameReader {
  private head = Buffer.allocUnsafe(HEADER_BYTES)
  private headFill = 0
  private header: FrameHeader | null = null
  private body: Uint8Array | null = null
  private bodyFill = 0

  /**
   * `bodyFor` may name where a frame's payload should land (a receiver waiting with its own
   * buffer), which saves allocating and copying it again.
   */
  constructor(
    private readonly onFrame: (h: FrameHeader, payload: Uint8Array) => void,
    private readonly bodyFor?: (h: FrameHeader, length: number) => Uint8Array | undefined,
  ) {}

  push(chunk: Buffer): void {
    let off = 0
    while (off < chunk.length) {
      if (this.header === null) {
        const n = Math.min(HEADER_BYTES - this.headFill, chunk.length - off)
        chunk.copy(this.head, this.headFill, off, off + n)
        this.headFill += n
        off += n
        if (this.headFill < HEADER_BYTES) return
        this.headFill = 0
        const len = this.head.readUInt32LE(0)
        this.header = {
          comm: this.head.readUInt32LE(4),
          seq: this.head.readUInt32LE(8),
          kind: this.head.readUInt32LE(12),
          chunk: this.head.readUInt32LE(16),
          from: this.head.readUInt32LE(20),
          total: this.head.readUInt32LE(24),
        }
        // A fresh ArrayBuffer starts at offset 0, so the payload can be viewed as any typed array.
        const dest = this.bodyFor?.(this.header, len)
        this.body = dest && dest.byteLength === len ? dest : new Uint8Array(len)
        this.bodyFill = 0
      } else {
        const body = this.body!
        const n = Math.min(body.length - this.bodyFill, chunk.length - off)
        body.set(chunk.subarray(off, off + n), this.bodyFill)
        this.bodyFill += n
        off += n
      }
      if (this.header !== null && this.bodyFill === this.body!.length) {
        const h = this.header
        const b = this.body!
        this.header = null
        this.body = null
        this.onFrame(h, b)
      }
    }
  }
}

type FrameSinkOptions = {
  onFrame: (h: FrameHeader, payload: Uint8Array) => void
  /** Where a frame's payload should land (a receiver waiting with its buffer of that length), else a new buffer. */
  bodyFor?: (h: FrameHeader, length: number) => Uint8Array | undefined
}

/**
 * A frame parser that owns the read buffer: pass `sink.onread()` as a client socket's `onread`
 * option. Each read lands where the frame being received goes (the header, or the rest of the
 * payload), so large payloads are never copied after the kernel writes them, and no read
 * allocates.
 */
export class FrameSink {
  private readonly head = new Uint8Array(HEADER_BYTES)
  private readonly view = new DataView(this.head.buffer)
  private header: FrameHeader | null = null
  private body: Uint8Array = this.head
  private fill = 0

  constructor(private readonly opts: FrameSinkOptions) {}

  /** The socket option: reads go into `next()`, and `landed(n)` follows each. */
  onread(): { buffer: () => Uint8Array; callback: (n: number) => void } {
    return { buffer: () => this.next(), callback: (n) => this.landed(n) }
  }

  /** Where the socket's next read should go. */
  next(): Uint8Array {
    return this.fill === 0 ? this.body : this.body.subarray(this.fill)
  }

  /** `n` bytes arrived in the buffer `next()` returned. */
  landed(n: number): void {
    this.fill += n
    if (this.fill < this.body.byteLength) return
    this.fill = 0
    if (this.header === null) {
      const v = this.view
      const len = v.getUint32(0, true)
      const h: FrameHeader = {
        comm: v.getUint32(4, true),
        seq: v.getUint32(8, true),
        kind: v.getUint32(12, true),
        chunk: v.getUint32(16, true),
        from: v.getUint32(20, true),
        total: v.getUint32(24, true),
      }
      if (len === 0) {
        this.opts.onFrame(h, new Uint8Array(0))
        return
      }
      const dest = this.opts.bodyFor?.(h, len)
      this.header = h
      // A fresh ArrayBuffer starts at offset 0, so the payload can be viewed as any typed array.
      this.body = dest && dest.byteLength === len ? dest : new Uint8Array(len)
      return
    }
    const h = this.header
    const b = this.body
    this.header = null
    this.body = this.head
    this.opts.onFrame(h, b)
  }
}
