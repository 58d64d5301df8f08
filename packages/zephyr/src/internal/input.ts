/** @module Opening inputs: storage read stream → byte counting → decompression. */
import { createReadStream } from 'node:fs'
import { open } from 'node:fs/promises'
import { Transform } from 'node:stream'
import type { Readable } from 'node:stream'
import { isRiggingError } from '@marin/rigging'
import type { TaskCounters } from '../counters.js'
import { codecOf, decompress } from '../compression.js'
import { ZephyrError } from '../errors.js'
import { localCopy } from './cache.js'
import { locate } from './location.js'

/** Counts bytes that pass through into `counters.bytesRead`. */
export function countingTransform(counters: TaskCounters | undefined, key: 'bytesRead' | 'bytesWritten'): Transform {
  return new Transform({
    transform(chunk: Buffer, _e, cb) {
      if (counters) counters[key] += chunk.length
      cb(null, chunk)
    },
  })
}

export function notFound(url: string, err: unknown): ZephyrError {
  return new ZephyrError('INPUT_NOT_FOUND', `${url}: input file does not exist; check the path or the glob`, false, {
    cause: err,
  })
}

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

/**
 * Splits a text stream into lines, yielding them in arrays with the 1-based
 * number of the first line. `\r\n` endings lose their `\r`.
 */
export async function* lines(stream: Readable, maxBatch = 1024): AsyncGenerator<{ first: number; lines: string[] }> {
  stream.setEncoding('utf8')
  let rest = ''
  let lineNo = 1
  for await (const chunk of stream as AsyncIterable<string>) {
    const text = rest + chunk
    const parts = text.split('\n')
    rest = parts.pop()!
    for (let i = 0; i < parts.length; i += maxBatch) {
      const slice = parts.slice(i, i + maxBatch)
      for (let j = 0; j < slice.length; j++) if (slice[j]!.endsWith('\r')) slice[j] = slice[j]!.slice(0, -1)
      yield { first: lineNo, lines: slice }
      lineNo += slice.length
    }
  }
  if (rest.length > 0) yield { first: lineNo, lines: [rest.endsWith('\r') ? rest.slice(0, -1) : rest] }
}
