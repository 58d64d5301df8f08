/** @module The writer contract: one writer per output shard, fed in batches. */

export type ShardWriter = {
  write(batch: readonly unknown[]): Promise<void>
  /** Finishes the file; it becomes visible atomically. */
  close(): Promise<void>
  /** Drops the partial file. */
  abort(err: Error): Promise<void>
}
