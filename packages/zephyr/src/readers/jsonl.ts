/** @module JSONL reader: one JSON value per line, `.gz`/`.zst`/`.bz2` by extension. */
import type { TaskCounters } from '../counters.js'
import { ZephyrError } from '../errors.js'
import { lines, openInput } from '../internal/input.js'

/** What to do with a line that is not JSON. */
export type CorruptLinePolicy = 'fail' | 'skip'

export type JsonlOptions = {
  /** `fail` throws `CORRUPT_JSONL` naming the file and line; `skip` drops the line and counts it. @default 'fail' */
  readonly onError?: CorruptLinePolicy
  /**
   * A line longer than this many bytes fails with `CORRUPT_JSONL` naming the
   * file, the line and its byte offset (whatever `onError` says: such a line
   * is held whole in memory before it can be parsed). @default 64 MiB
   */
  readonly maxRecordBytes?: number
}

/** Records of one JSONL file, in batches. Blank lines are ignored. */
export async function* readJsonl(
  url: string,
  opts: JsonlOptions = {},
  counters?: TaskCounters,
): AsyncGenerator<unknown[]> {
  const policy = opts.onError ?? 'fail'
  for await (const { first, lines: batch } of lines(await openInput(url, counters), {
    url,
    maxRecordBytes: opts.maxRecordBytes,
  })) {
    const out: unknown[] = []
    for (let i = 0; i < batch.length; i++) {
      const line = batch[i]!
      if (line.length === 0 || /^\s*$/.test(line)) continue
      try {
        out.push(JSON.parse(line))
      } catch (err) {
        if (policy === 'skip') {
          if (counters) counters.skippedLines++
          continue
        }
        throw new ZephyrError(
          'CORRUPT_JSONL',
          `${url}: line ${first + i} is not valid JSON (` +
            `${(err as Error).message}); fix the line or load with { ` +
            `onError: 'skip' }`,
          false,
          { cause: err },
        )
      }
    }
    if (out.length) yield out
  }
}
