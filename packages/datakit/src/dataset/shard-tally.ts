/**
 * @module What a dataset's summary is made of, counted while its shards are written rather than
 * by reading them back: each shard's record count, text bytes and ids in order, kept in a tally
 * file beside the shard (`part-00000-of-00008.parquet.tally.json`). The dataset hash is SHA-256
 * over all ids in shard order; a shard without a readable tally (written before tallies existed)
 * is read instead, with the same result.
 */
import { createHash } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import { ParquetReader } from '@marin/zephyr'
import { atomicWrite } from '../internal/atomic-write.js'

/** One shard's counts; `ids` is the shard's record ids joined, in order. */
export type ShardTally = { records: number; bytes: number; ids: string }

export type DatasetSummary = { records: number; bytes: number; datasetHash: string }

/** Counts records as they pass on their way into a shard. */
export class Tally {
  private records = 0
  private bytes = 0
  private readonly ids: string[] = []

  add(record: { id: string; text: string }): void {
    this.records++
    this.bytes += Buffer.byteLength(record.text, 'utf8')
    this.ids.push(record.id)
  }

  /** Writes the tally of the shard at `shardPath` beside it (atomically: a partial file is never read). */
  async save(shardPath: string): Promise<void> {
    const tally: ShardTally = { records: this.records, bytes: this.bytes, ids: this.ids.join('') }
    await atomicWrite(tallyPath(shardPath), JSON.stringify(tally))
  }
}

/** Where the tally of a shard lives. */
export function tallyPath(shardPath: string): string {
  return `${shardPath}.tally.json`
}

/** A shard's tally from its file, or `undefined` when there is none (or it cannot be read). */
async function savedTally(shardPath: string): Promise<ShardTally | undefined> {
  try {
    const t = JSON.parse(await readFile(tallyPath(shardPath), 'utf8')) as ShardTally
    return typeof t.records === 'number' && typeof t.bytes === 'number' && typeof t.ids === 'string' ? t : undefined
  } catch {
    return undefined
  }
}

/**
 * Record count, text bytes and dataset hash of finished shards, in order: from their tallies
 * when `tallied` (ingest writes them), else, and for any shard without one, by reading the shard.
 */
export async function summarizeShards(paths: readonly string[], tallied = false): Promise<DatasetSummary> {
  const h = createHash('sha256')
  let records = 0
  let bytes = 0
  for (const path of paths) {
    const t = tallied ? await savedTally(path) : undefined
    if (t) {
      h.update(t.ids)
      records += t.records
      bytes += t.bytes
      continue
    }
    for await (const row of new ParquetReader({ path })) {
      const r = row as { id: string; text: string }
      h.update(r.id)
      records++
      bytes += Buffer.byteLength(r.text, 'utf8')
    }
  }
  return { records, bytes, datasetHash: h.digest('hex') }
}
