/**
 * @module Opening outputs: writer → compression → byte counting → storage write
 * stream. The storage stream is atomic: the object appears when `close()`
 * resolves and not at all after `abort()` or a crash.
 */
import { PassThrough } from 'node:stream'
import type { Writable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import type { TaskCounters } from '../counters.js'
import { codecOf, compressor } from '../compression.js'
import { countingTransform } from './byte-streams.js'
import { locate } from './location.js'

export type Output = {
  /** Writes bytes, waiting when the stream is full. */
  write(chunk: Uint8Array | string): Promise<void>
  /** Ends the stream and waits until the object is in place. */
  close(): Promise<void>
  /** Drops the object: nothing appears at the path. */
  abort(err: Error): Promise<void>
}

/**
 * `bufferBytes` is how much may wait to be written before `write` waits: a
 * writer that emits large chunks (a Parquet row group) passes more, so the
 * disk write of one chunk overlaps the encoding of the next. @default 1 MiB
 */
export async function openOutput(url: string, counters?: TaskCounters, bufferBytes = 1 << 20): Promise<Output> {
  const loc = await locate(url)
  const sink: Writable = await loc.storage.writeStream(loc.path)
  const head = new PassThrough({ highWaterMark: bufferBytes })
  const codec = await compressor(codecOf(loc.path), loc.url)
  const stages = codec
    ? [head, codec, countingTransform(counters, 'bytesWritten'), sink]
    : [head, countingTransform(counters, 'bytesWritten'), sink]
  const done = pipeline(stages as [PassThrough, ...Writable[]])
  let failed: Error | undefined
  done.catch((err: Error) => {
    failed = err
  })
  return {
    async write(chunk) {
      if (failed) throw failed
      if (!head.write(chunk)) {
        await new Promise<void>((resolve, reject) => {
          const onDrain = () => {
            head.off('error', onError)
            resolve()
          }
          const onError = (e: Error) => {
            head.off('drain', onDrain)
            reject(e)
          }
          head.once('drain', onDrain)
          head.once('error', onError)
          done.catch(onError)
        })
      }
    },
    async close() {
      head.end()
      await done
    },
    async abort(err) {
      sink.destroy(err)
      head.destroy(err)
      await done.catch(() => {})
    },
  }
}
