/** @module What a run measured, per stage: plain data that crosses process boundaries. */

/** Counters of one task (one shard of one stage), summed into the stage's counters. */
export type TaskCounters = {
  /** Records read from the stage's input (after loaders, before transforms). */
  recordsIn: number
  /** Records leaving the stage (written, shuffled or collected). */
  recordsOut: number
  bytesRead: number
  bytesWritten: number
  /** Corrupt JSONL lines dropped under the `skip` policy. */
  skippedLines: number
  /** Unreadable or too-large WARC records skipped (each logged with its file and byte offset). */
  skippedRecords: number
  /** Parquet row groups skipped by statistics. */
  rowGroupsSkipped: number
  /** Bytes written to local spill files by groupBy/deduplicate. */
  spilledBytes: number
  /** Input files that ended early and were read up to the cut (`onTruncated: 'stop'`). */
  truncatedFiles: number
}

export type StageCounters = TaskCounters & {
  readonly stage: number
  /** A readable summary of the stage, e.g. `loadJsonl → filter → map → writeParquet`. */
  readonly name: string
  shards: number
  /** Shards not run because their output existed (`skipExisting`). */
  shardsSkipped: number
  /** Task attempts that failed and were retried. */
  retries: number
  timeMs: number
}

export function emptyTaskCounters(): TaskCounters {
  return {
    recordsIn: 0,
    recordsOut: 0,
    bytesRead: 0,
    bytesWritten: 0,
    skippedLines: 0,
    skippedRecords: 0,
    rowGroupsSkipped: 0,
    spilledBytes: 0,
    truncatedFiles: 0,
  }
}

export function addTaskCounters(into: TaskCounters, c: TaskCounters): void {
  into.recordsIn += c.recordsIn
  into.recordsOut += c.recordsOut
  into.bytesRead += c.bytesRead
  into.bytesWritten += c.bytesWritten
  into.skippedLines += c.skippedLines
  into.skippedRecords += c.skippedRecords
  into.rowGroupsSkipped += c.rowGroupsSkipped
  into.spilledBytes += c.spilledBytes
  into.truncatedFiles += c.truncatedFiles
}
