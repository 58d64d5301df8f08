/**
 * @module What zephyr's inputs, outputs and local copies share: a byte-counting pass-through and the
 * missing-input error.
 */
import { Transform } from 'node:stream'
import type { TaskCounters } from '../counters.js'
import { ZephyrError } from '../errors.js'

/** A pass-through that adds each chunk's length to `counters[key]`. */
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
