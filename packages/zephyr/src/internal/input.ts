/** @module Opening inputs: storage read stream → byte counting → decompression. */
import { createReadStream } from 'node:fs'
import { open } from 'node:fs/promises'
import type { Readable } from 'node:stream'
import { isRiggingError } from '@marin/rigging'
import type { TaskCounters } from '../counters.js'
import { codecOf, decompress } from '../compression.js'
import { ZephyrError } from '../errors.js'
import { countingTransform, notFound } from './byte-streams.js'
import { localCopy } from './cache.js'
import { locate } from './location.js'

/** Counts bytes that pass through into `counters.bytesRead`. */
/**
 * Local files are read in 1 MiB chunks rather than the 64 KiB default: each
 * chunk is one trip through libuv's thread pool, and on a busy machine every
 * trip waits for a core, so fewer, larger reads keep a worker busy computing.
 */
const READ_CHUNK = 1 << 20

async function localStream(path: string): Promise<Readable> {
  return (await open(path, 'r')).createReadStream({ highWaterMark: READ_CHUNK })
}

/**
 * `out`, which closes `source` when it closes. A pipe carries data down but not
 * a destroy up: a reader that stops early, or fails, destroys the stream it
 * reads, and the file under it must close then, not when it is garbage collected.
 */
function closingSource(out: Readable, source: Readable): Readable {
  out.once('close', () => source.destroy())
  return out
}

/** A decompressed byte stream of the object at `url`; destroying it closes the object. */
export async function openInput(url: string, counters?: TaskCounters): Promise<Readable> {
  const loc = await locate(url)
  let raw: Readable
  try {
    const local = loc.storage.localPath(loc.path)
    const cached = local === undefined ? await localCopy(loc, counters) : undefined
    if (cached !== undefined) {
      // a cached copy was counted while it downloaded
      const file = createReadStream(cached, { highWaterMark: READ_CHUNK })
      return closingSource(decompress(file, codecOf(loc.path), loc.url), file)
    }
    raw = local === undefined ? await loc.storage.readStream(loc.path) : await localStream(local)
  } catch (err) {
    if (isRiggingError(err, 'STORAGE_NOT_FOUND') || (err as NodeJS.ErrnoException).code === 'ENOENT')
      throw notFound(url, err)
    throw err
  }
  const counted = countingTransform(counters, 'bytesRead')
  raw.on('error', (err) => counted.destroy(isRiggingError(err, 'STORAGE_NOT_FOUND') ? notFound(url, err) : err))
  return closingSource(decompress(raw.pipe(counted), codecOf(loc.path), loc.url), raw)
}

/** The whole object at `url`, decompressed. */
export async function readInput(url: string, counters?: TaskCounters): Promise<Buffer> {
  const chunks: Buffer[] = []
  for await (const c of await openInput(url, counters)) chunks.push(c as Buffer)
  return Buffer.concat(chunks)
}

/** The longest record (line) a reader accepts by default: 64 MiB. */
export const DEFAULT_MAX_RECORD_BYTES = 64 * 2 ** 20

export type LinesOptions = {
  /** The file, for error messages. */
  readonly url: string
  /** A line longer than this many bytes fails with `CORRUPT_JSONL`. @default 64 MiB */
  readonly maxRecordBytes?: number
  /** Lines per yielded batch at most. @default 1024 */
  readonly maxBatch?: number
}

function mib(bytes: number): string {
  return bytes >= 2 ** 20 ? `${+(bytes / 2 ** 20).toFixed(1)} MiB` : `${bytes} bytes`
}

/**
 * Splits a byte stream into UTF-8 lines, yielding them in arrays with the
 * 1-based number of the first line. `\r\n` endings lose their `\r`.
 *
 * Work is linear in the bytes read: each chunk is searched for newlines once,
 * and a line that spans chunks is kept as its pieces and joined once, when its
 * newline arrives (re-splitting the growing tail made a 32 MB line take 46 s).
 * A line over `maxRecordBytes` fails as soon as that many bytes arrive without
 * a newline, naming the file, the line and its byte offset.
 */
export async function* lines(stream: Readable, opts: LinesOptions): AsyncGenerator<{ first: number; lines: string[] }> {
  const max = opts.maxRecordBytes ?? DEFAULT_MAX_RECORD_BYTES
  const maxBatch = opts.maxBatch ?? 1024
  const tooLong = (line: number, at: number) =>
    new ZephyrError(
      'CORRUPT_JSONL',
      `${opts.url}: line ${line} (from byte ${at}) is longer than the ${mib(max)} record limit; if records ` +
        `this large are expected, raise maxRecordBytes in the reader options, else the file is damaged ` +
        `(a lost newline) or not line-delimited`,
    )
  const strip = (line: string) => (line.endsWith('\r') ? line.slice(0, -1) : line)
  let pending: Buffer[] = []
  let pendingBytes = 0
  let pendingStart = 0
  let offset = 0
  let lineNo = 1
  for await (const raw of stream as AsyncIterable<Buffer | string>) {
    const chunk = typeof raw === 'string' ? Buffer.from(raw, 'utf8') : raw
    const out: string[] = []
    let start = 0
    const first = chunk.indexOf(10)
    if (first >= 0 && pendingBytes > 0) {
      if (pendingBytes + first > max) throw tooLong(lineNo, pendingStart)
      pending.push(chunk.subarray(0, first))
      out.push(strip(Buffer.concat(pending).toString('utf8')))
      pending = []
      pendingBytes = 0
      start = first + 1
    }
    const last = first < 0 ? -1 : chunk.lastIndexOf(10)
    if (last >= start) {
      if (last - start > max) {
        // the lines inside this chunk could be too long themselves
        for (let at = start, n = 0; at <= last; n++) {
          const nl = chunk.indexOf(10, at)
          if (nl - at > max) throw tooLong(lineNo + out.length + n, offset + at)
          at = nl + 1
        }
      }
      const parts = chunk.toString('utf8', start, last).split('\n')
      for (const p of parts) out.push(strip(p))
      start = last + 1
    }
    if (start < chunk.length) {
      if (pendingBytes === 0) pendingStart = offset + start
      pending.push(chunk.subarray(start))
      pendingBytes += chunk.length - start
      if (pendingBytes > max) throw tooLong(lineNo + out.length, pendingStart)
    }
    offset += chunk.length
    for (let i = 0; i < out.length; i += maxBatch) {
      const slice = out.length <= maxBatch ? out : out.slice(i, i + maxBatch)
      yield { first: lineNo, lines: slice }
      lineNo += slice.length
    }
  }
  if (pendingBytes > 0) yield { first: lineNo, lines: [strip(Buffer.concat(pending).toString('utf8'))] }
}
