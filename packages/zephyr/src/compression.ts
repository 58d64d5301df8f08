/**
 * @module Compression by file extension: `.gz` (zlib), `.zst` (zstd), `.bz2` (read only).
 *
 * Node 20's zlib has no zstd (it arrives in 22.15), so zstd decoding streams
 * through `fzstd` (pure JS) and encoding uses `@bokuweb/zstd-wasm`, whose wasm
 * ships inside the npm package. Written `.zst` files are a sequence of
 * independent frames (one per ~1 MiB of input), which every zstd decoder reads.
 */
import { Transform } from 'node:stream'
import type { Readable } from 'node:stream'
import { createGunzip, createGzip } from 'node:zlib'
import { Decompress } from 'fzstd'
import { compress as zstdCompress, init as zstdInit } from '@bokuweb/zstd-wasm'
import bz2 from 'unbzip2-stream'
import { ZephyrError } from './errors.js'

export type Codec = 'none' | 'gzip' | 'zstd' | 'bzip2'

/** The codec a path's extension implies. */
export function codecOf(path: string): Codec {
  if (/\.gz$/i.test(path)) return 'gzip'
  if (/\.zst$/i.test(path)) return 'zstd'
  if (/\.bz2$/i.test(path)) return 'bzip2'
  return 'none'
}

function zstdDecoder(): Transform {
  let decoder: Decompress
  const t = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      try {
        decoder.push(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength))
        cb()
      } catch (err) {
        cb(err as Error)
      }
    },
    flush(cb) {
      try {
        decoder.push(new Uint8Array(0), true)
        cb()
      } catch (err) {
        cb(err as Error)
      }
    },
  })
  decoder = new Decompress((data) => t.push(Buffer.from(data.buffer, data.byteOffset, data.byteLength)))
  return t
}

/**
 * Pipes `raw` through the decoder of `codec`. Decoder errors are rethrown as
 * `CORRUPT_COMPRESSED` naming `url`.
 */
export function decompress(raw: Readable, codec: Codec, url: string): Readable {
  if (codec === 'none') return raw
  const decoder: Transform =
    codec === 'gzip' ? createGunzip() : codec === 'zstd' ? zstdDecoder() : (bz2() as unknown as Transform)
  raw.on('error', (err) => decoder.destroy(err))
  const out = raw.pipe(decoder)
  const wrapped = new Transform({
    transform(chunk, _e, cb) {
      cb(null, chunk)
    },
  })
  out.on('error', (err: Error) =>
    wrapped.destroy(
      err instanceof ZephyrError || (err as NodeJS.ErrnoException).code?.startsWith('STORAGE')
        ? err
        : new ZephyrError(
            'CORRUPT_COMPRESSED',
            `${url}: cannot decode ${codec} data (${err.message}); check ` +
              `that the file is complete and its extension matches its format`,
            false,
            { cause: err },
          ),
    ),
  )
  return out.pipe(wrapped)
}

let zstdReady: Promise<void> | undefined

/** Frames of at most this much input each. */
const ZSTD_FRAME = 1 << 20

function zstdEncoder(level: number): Transform {
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
      zstdReady ??= zstdInit()
      await zstdReady
      return zstdEncoder(3)
    case 'bzip2':
      throw new ZephyrError('INVALID_PLAN', `${path}: writing .bz2 is not supported; write .gz or .zst instead`)
  }
}
