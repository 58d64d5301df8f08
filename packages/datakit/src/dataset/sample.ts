/**
 * @module Deterministic sampling and train/validation splits. Both rank documents by a
 * seeded hash of their id, so a document's fate depends only on (id, seed): the same
 * sample every run, and a document never moves between splits when the dataset grows.
 *
 * @example
 * const small = sample('brown', { n: 1000, seed: 1 })
 * const { train, validation } = split('brown', { validationFraction: 0.05 })
 */
import { createHash } from 'node:crypto'
import { ParquetReader } from '@marin/zephyr'
import type { Dataset } from '@marin/zephyr'
import { DatakitError } from '../errors.js'
import { fromDatakit, readManifestSync } from './from-datakit.js'
import { openDataset } from './open-dataset.js'
import type { OpenOptions } from './open-dataset.js'
import type { DatakitRecord } from './record.js'

/** A number in [0, 1) fixed by (id, seed). */
export function idUnit(id: string, seed: number): number {
  const d = createHash('sha256').update(`${seed}\u0000${id}`).digest()
  return (d.readUInt32BE(0) * 2 ** 21 + (d.readUInt32BE(4) >>> 11)) / 2 ** 53
}

export type SampleOptions = OpenOptions & {
  /** Exactly this many documents (all when the dataset is smaller). */
  readonly n?: number
  /** Each document kept with this probability, independently. */
  readonly fraction?: number
  /** @default 0 */
  readonly seed?: number
}

/** A deterministic sample of a dataset: `n` documents or a `fraction`, chosen by the seeded id hash. */
export function sample(name: string, opts: SampleOptions): Dataset<DatakitRecord> {
  const seed = opts.seed ?? 0
  if ((opts.n === undefined) === (opts.fraction === undefined)) {
    throw new DatakitError('INVALID_ARGUMENT', `sample ${name}: pass exactly one of n (a count) or fraction (in [0, 1])`)
  }
  const ds = fromDatakit(name, opts)
  if (opts.fraction !== undefined) {
    const f = opts.fraction
    if (!(f >= 0 && f <= 1)) throw new DatakitError('INVALID_ARGUMENT', `sample ${name}: fraction must be in [0, 1], got ${f}`)
    return ds.filter((r) => idUnit(r.id, seed) < f)
  }
  const n = opts.n!
  if (!Number.isInteger(n) || n < 0) throw new DatakitError('INVALID_ARGUMENT', `sample ${name}: n must be a non-negative integer, got ${n}`)
  // Rank every (shard, row) by its hash, once per run; ties (equal ids) break by position, so exactly n are kept.
  const pinned = { prefix: opts.prefix, version: readManifestSync(name, opts).version }
  let chosen: Promise<Set<string>> | undefined
  const choose = async (): Promise<Set<string>> => {
    const v = await openDataset(name, pinned)
    const ranked: { u: number; shard: number; row: number }[] = []
    for (const [shard, path] of v.shards.entries()) {
      let row = 0
      for await (const r of new ParquetReader({ path })) ranked.push({ u: idUnit((r as { id: string }).id, seed), shard, row: row++ })
    }
    ranked.sort((a, b) => a.u - b.u || a.shard - b.shard || a.row - b.row)
    return new Set(ranked.slice(0, n).map((x) => `${x.shard}:${x.row}`))
  }
  return ds.mapShard(async function* (records, info) {
    const keep = await (chosen ??= choose())
    let row = 0
    for await (const r of records) if (keep.has(`${info.shard}:${row++}`)) yield r
  })
}

export type SplitOptions = OpenOptions & {
  /** Share of documents in the validation split, in (0, 1). */
  readonly validationFraction: number
  /** @default 0 */
  readonly seed?: number
}

/** Train and validation splits by hashed id: a document's split never depends on the rest of the dataset. */
export function split(name: string, opts: SplitOptions): { train: Dataset<DatakitRecord>; validation: Dataset<DatakitRecord> } {
  const f = opts.validationFraction
  if (!(f > 0 && f < 1)) throw new DatakitError('INVALID_ARGUMENT', `split ${name}: validationFraction must be in (0, 1), got ${f}`)
  const seed = opts.seed ?? 0
  const ds = fromDatakit(name, opts)
  return { train: ds.filter((r) => idUnit(r.id, seed) >= f), validation: ds.filter((r) => idUnit(r.id, seed) < f) }
}
