/**
 * @module Length-prefixed v8-serialized records: the format of shuffle buckets
 * and spill files. v8 serialization keeps what JSON loses (bigint, Date,
 * Uint8Array, Map, undefined) and is several times faster than JSON text.
 */
import { deserialize, serialize } from 'node:v8'
import type { Readable } from 'node:stream'

/** Encodes records as `[u32 length][bytes]` frames, in chunks of about `chunkBytes`. */
export class FrameEncoder {
  private parts: Buffer[] = []
  private size = 0
  constructor(private readonly chunkBytes = 1 << 20) {}

  /** Adds one record; returns a full chunk to write when one is ready. */
  add(record: unknown): Buffer | undefined {
    const body = serialize(record)
    const head = Buffer.allocUnsafe(4)
    head.writeUInt32LE(body.length, 0)
    this.parts.push(head, body)
    this.size += 4 + body.length
    return this.size >= this.chunkBytes ? this.take() : undefined
  }

  /** Whatever is buffered (possibly empty). */
  take(): Buffer {
    const b = Buffer.concat(this.parts, this.size)
    this.parts = []
    this.size = 0
    return b
  }

  get buffered(): number {
    return this.size
  }
}

/** A decoded record with the size of its frame (a proxy for its memory footprint). */
export type Frame = { readonly value: unknown; readonly bytes: number }

/** Decodes a stream of frames, in batches. */
export async function* decodeFrames(
  stream: AsyncIterable<Buffer | Uint8Array> | Iterable<Buffer> | Readable,
): AsyncGenerator<Frame[]> {
  let pending: Buffer = Buffer.alloc(0)
  for await (const chunk of stream as AsyncIterable<Buffer>) {
    pending = pending.length ? Buffer.concat([pending, chunk]) : Buffer.from(chunk)
    const out: Frame[] = []
    let off = 0
    while (off + 4 <= pending.length) {
      const len = pending.readUInt32LE(off)
      if (off + 4 + len > pending.length) break
      out.push({ value: deserialize(pending.subarray(off + 4, off + 4 + len)), bytes: len + 4 })
      off += 4 + len
    }
    pending = pending.subarray(off)
    if (out.length) yield out
  }
  if (pending.length) throw new Error(`truncated record frame (${pending.length} trailing bytes)`)
}
