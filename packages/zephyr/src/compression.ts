/**
 * @module Compression by file extension: `.gz` (zlib), `.zst` (zstd), `.bz2` (read only).
 *
 * Node 20's zlib has no zstd (it arrives in 22.15), so zstd decoding streams
 * through `fzstd` (pure JS), one block at a time (`internal/zstd-pull.ts`), and
 * encoding uses `@bokuweb/zstd-wasm`, whose wasm ships inside the npm package.
 * bzip2 is decoded block by block too (`internal/bzip2.ts`): decoded bytes are
 * made only as fast as they are read, so a file that expands a millionfold
 * costs no more memory than one that does not. Written `.zst` files are a sequence of
 * independent frames (one per ~1 MiB of input), which every zstd decoder reads.
 */
import { Readable, Transform } from 'node:stream'
import type { Duplex } from 'node:stream'
import { createGunzip, createGzip } from 'node:zlib'
import { ZephyrError } from './errors.js'
import { Bzip2Decoder } from './internal/bzip2.js'
import { PullStream, TruncatedInput } from './internal/pull-stream.js'
import { ZstdPullDecoder } from './internal/zstd-pull.js'

export type Codec = 'none' | 'gzip' | 'zstd' | 'bzip2'

/** The codec a path's extension implies. */
export function codecOf(path: string): Codec {
  if (/\.gz$/i.test(path)) return 'gzip'
  if (/\.zst$/i.test(path)) return 'zstd'
  if (/\.bz2$/i.test(path)) return 'bzip2'
  return 'none'
}

/**
 * `source`'s chunks, then its error. A decoder that fails on a cut input has
 * already produced everything that decodes, but a stream destroyed with an
 * error drops what its reader has not taken yet; here the error is raised only
 * once every chunk before it has been read.
 */
class ErrorAfterData extends Readable {
  private readonly queue: Buffer[] = []
  private ended = false
  private failure: Error | undefined
  private waiting = false

  constructor(private readonly source: Readable) {
    super()
    source.on('data', (chunk: Buffer) => {
      this.queue.push(chunk)
      if (this.queue.length >= 4) source.pause()
      this.serve()
    })
    source.on('end', () => {
      this.ended = true
      this.serve()
    })
  }

  /** Records the stream's failure; the first one wins. */
  fail(err: Error): void {
    this.failure ??= err
    this.serve()
  }

  override _read(): void {
    this.waiting = true
    this.serve()
  }

  private serve(): void {
    if (!this.waiting) return
    if (this.queue.length > 0) {
      this.waiting = false
      this.push(this.queue.shift())
      if (this.queue.length < 4) this.source.resume()
    } else if (this.failure) {
      this.waiting = false
      // chunks the reader has not taken yet come first; an empty push lets read() ask again
      if (this.readableLength === 0) this.destroy(this.failure)
      else this.push(Buffer.alloc(0))
    } else if (this.ended) {
      this.waiting = false
      this.push(null)
    }
  }

  override _destroy(err: Error | null, cb: (err?: Error | null) => void): void {
    this.source.destroy()
    cb(err)
  }
}

/**
 * Pipes `raw` through the decoder of `codec`. Everything that decodes is
 * delivered; then a decoder error is rethrown as `CORRUPT_COMPRESSED` naming
 * `url`, marked `truncated` when the input had ended (a cut file: the last
 * block or frame is incomplete).
 */
export function decompress(raw: Readable, codec: Codec, url: string): Readable {
  if (codec === 'none') return raw
  // zlib honours backpressure itself; zstd and bzip2 decode only as far as the reader has read
  const decoder: Duplex =
    codec === 'gzip' ? createGunzip() : new PullStream(codec === 'zstd' ? new ZstdPullDecoder() : new Bzip2Decoder())
  let inputEnded = false
  let decodedBytes = 0
  raw.once('end', () => {
    inputEnded = true
  })
  decoder.on('data', (chunk: Buffer) => {
    decodedBytes += chunk.length
  })
  const out = new ErrorAfterData(decoder)
  raw.on('error', (err) => out.fail(err))
  decoder.on('error', (err: Error) => {
    if (err instanceof ZephyrError || (err as NodeJS.ErrnoException).code?.startsWith('STORAGE')) out.fail(err)
    // zlib fails as soon as it sees the end; the pull decoders fail late, and say when they were cut
    else if (codec === 'gzip' ? inputEnded : err instanceof TruncatedInput)
      out.fail(
        new ZephyrError(
          'CORRUPT_COMPRESSED',
          `${url}: the file ends inside a ${codec === 'bzip2' ? 'bzip2 block' : `${codec} frame`} (after ` +
            `${decodedBytes} decoded bytes): it is truncated, e.g. by an interrupted download; fetch it again`,
          false,
          { cause: err, truncated: true },
        ),
      )
    else
      out.fail(
        new ZephyrError(
          'CORRUPT_COMPRESSED',
          `${url}: cannot decode ${codec} data after ${decodedBytes} decoded bytes (${err.message}); check ` +
            `that the file is complete and its extension matches its format`,
          false,
          { cause: err },
        ),
      )
  })
  raw.pipe(decoder)
  return out
}

type ZstdCompress = typeof import('@bokuweb/zstd-wasm')['compress']

// @bokuweb/zstd-wasm is imported (and its wasm set up) at the first .zst written, not with zephyr
let zstdReady: Promise<ZstdCompress> | undefined

/** Frames of at most this much input each. */
const ZSTD_FRAME = 1 << 20

function zstdEncoder(zstdCompress: ZstdCompress, level: number): Transform {
  let pending: Buffer[] = []
  let size = 0
  const emit = (t: Transform) => {
    if (size === 0) return
    const frame = zstdCompress(Buffer.concat(pending, size), level)
    pending = []
    size = 0
    t.push(Buffer.from(frame.buffer, frame.byteOffset, frame.byteLength))
  }
  return new Transform({
    transform(chunk: Buffer, _e, cb) {
      pending.push(chunk)
      size += chunk.length
      try {
        if (size >= ZSTD_FRAME) emit(this)
        cb()
      } catch (err) {
        cb(err as Error)
      }
    },
    flush(cb) {
      try {
        emit(this)
        cb()
      } catch (err) {
        cb(err as Error)
      }
    },
  })
}

/** A transform that encodes with `codec`, or `undefined` for `none`. */
export async function compressor(codec: Codec, path: string): Promise<Transform | undefined> {
  switch (codec) {
    case 'none':
      return undefined
    case 'gzip':
      return createGzip({ level: 6 })
    case 'zstd':
      zstdReady ??= import('@bokuweb/zstd-wasm').then(async ({ compress, init }) => {
        await init()
        return compress
      })
      return zstdEncoder(await zstdReady, 3)
    case 'bzip2':
      throw new ZephyrError('INVALID_PLAN', `${path}: writing .bz2 is not supported; write .gz or .zst instead`)
  }
}
