/** @module Plain-text reader: one record per file (`{path, text}`) or one string per line. */
import type { TaskCounters } from '../counters.js'
import { lines, openInput, readInput } from '../internal/input.js'

export type TextOptions = {
  /** `file`: one `{ path, text }` per file; `line`: one string per line. @default 'line' */
  readonly per?: 'file' | 'line'
  /** With `per: 'line'`, a line longer than this many bytes fails with `CORRUPT_JSONL`. @default 64 MiB */
  readonly maxRecordBytes?: number
}

export async function* readText(
  url: string,
  opts: TextOptions = {},
  counters?: TaskCounters,
): AsyncGenerator<unknown[]> {
  if ((opts.per ?? 'line') === 'file') {
    const text = (await readInput(url, counters)).toString('utf8')
    yield [{ path: url, text }]
    return
  }
  for await (const { lines: batch } of lines(await openInput(url, counters), {
    url,
    maxRecordBytes: opts.maxRecordBytes,
  }))
    yield batch
}
