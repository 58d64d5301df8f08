/**
 * @module The per-shard functions of datakit's lazy datasets (`fromDatakit`, `sample`,
 * `split`). They are module exports reached by reference, with their settings as bound
 * args, so zephyr's worker processes import them with everything they use. Work done
 * once per run (resolving a version's shards, ranking a sample) is done once per process.
 */
import { fnRef, ParquetReader } from '@marin/zephyr'
import type { ShardInfo } from '@marin/zephyr'
import { idUnit } from './id-unit.js'
import { openDataset } from './open-dataset.js'
import type { DatakitRecord } from './record.js'

/** A pinned dataset version: what every process resolves the same way. */
export type PinnedDataset = { readonly name: string; readonly prefix: string; readonly version: number }

const shardLists = new Map<string, Promise<readonly string[]>>()
const samples = new Map<string, Promise<Set<string>>>()

function shardsOf(d: PinnedDataset): Promise<readonly string[]> {
  const key = JSON.stringify([d.prefix, d.name, d.version])
  let p = shardLists.get(key)
  if (!p) {
    p = openDataset(d.name, { prefix: d.prefix, version: d.version }).then((v) => v.shards)
    p.catch(() => shardLists.delete(key))
    shardLists.set(key, p)
  }
  return p
}

/** Shard indexes → the records of those Parquet shards of the dataset version. */
export async function* readDatakitShards(
  items: AsyncIterable<number>,
  _shard: ShardInfo,
  d: PinnedDataset,
): AsyncGenerator<DatakitRecord> {
  const urls = await shardsOf(d)
  for await (const i of items) {
    for await (const row of new ParquetReader({ path: urls[i]! })) yield row as DatakitRecord
  }
}

/** The `n` (shard, row) positions with the lowest seeded id hash; ties break by position. */
async function choose(a: PinnedDataset & { n: number; seed: number }): Promise<Set<string>> {
  const ranked: { u: number; shard: number; row: number }[] = []
  for (const [shard, path] of (await shardsOf(a)).entries()) {
    let row = 0
    for await (const r of new ParquetReader({ path }))
      ranked.push({ u: idUnit((r as { id: string }).id, a.seed), shard, row: row++ })
  }
  ranked.sort((x, y) => x.u - y.u || x.shard - y.shard || x.row - y.row)
  return new Set(ranked.slice(0, a.n).map((x) => `${x.shard}:${x.row}`))
}

/** Keeps the records of a shard that are among the `n` chosen ones. */
export async function* sampleShard(
  records: AsyncIterable<DatakitRecord>,
  info: ShardInfo,
  a: PinnedDataset & { n: number; seed: number },
): AsyncGenerator<DatakitRecord> {
  const key = JSON.stringify([a.prefix, a.name, a.version, a.n, a.seed])
  let chosen = samples.get(key)
  if (!chosen) {
    chosen = choose(a)
    chosen.catch(() => samples.delete(key))
    samples.set(key, chosen)
  }
  const keep = await chosen
  let row = 0
  for await (const r of records) if (keep.has(`${info.shard}:${row++}`)) yield r
}

/** True when the record's seeded id hash is in [from, to). */
export function idUnitIn(r: DatakitRecord, a: { seed: number; from: number; to: number }): boolean {
  const u = idUnit(r.id, a.seed)
  return u >= a.from && u < a.to
}

export const READ_DATAKIT_SHARDS = fnRef<typeof readDatakitShards>(import.meta.url, 'readDatakitShards')
export const SAMPLE_SHARD = fnRef<typeof sampleShard>(import.meta.url, 'sampleShard')
export const ID_UNIT_IN = fnRef<typeof idUnitIn>(import.meta.url, 'idUnitIn')
