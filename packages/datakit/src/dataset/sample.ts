/**
 * @module Deterministic sampling and train/validation splits. Both rank documents by a
 * seeded hash of their id, so a document's fate depends only on (id, seed): the same
 * sample every run, and a document never moves between splits when the dataset grows.
 *
 * @example
 * const small = sample('brown', { n: 1000, seed: 1 })
 * const { train, validation } = split('brown', { validationFraction: 0.05 })
 */
import type { Dataset } from '@marin/zephyr'
import { DatakitError } from '../errors.js'
import { resolvePrefix } from '../store.js'
import { fromDatakit, readManifestSync } from './from-datakit.js'
import type { OpenOptions } from './open-dataset.js'
import type { DatakitRecord } from './record.js'
import { ID_UNIT_IN, SAMPLE_SHARD } from './shard-fns.js'
import type { PinnedDataset } from './shard-fns.js'

export { idUnit } from './id-unit.js'

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
    throw new DatakitError(
      'INVALID_ARGUMENT',
      `sample ${name}: pass exactly one of n (a count) or fraction (in [0, 1])`,
    )
  }
  const ds = fromDatakit(name, opts)
  if (opts.fraction !== undefined) {
    const f = opts.fraction
    if (!(f >= 0 && f <= 1))
      throw new DatakitError('INVALID_ARGUMENT', `sample ${name}: fraction must be in [0, 1], got ${f}`)
    return ds.filter(ID_UNIT_IN, { args: { seed, from: 0, to: f } })
  }
  const n = opts.n!
  if (!Number.isInteger(n) || n < 0)
    throw new DatakitError('INVALID_ARGUMENT', `sample ${name}: n must be a non-negative integer, got ${n}`)
  // Rank every (shard, row) by its hash, once per run; ties (equal ids) break by position, so exactly n are kept.
  const pinned: PinnedDataset = {
    name,
    prefix: resolvePrefix(opts.prefix),
    version: readManifestSync(name, opts).version,
  }
  return ds.mapShard(SAMPLE_SHARD, { args: { ...pinned, n, seed } })
}

export type SplitOptions = OpenOptions & {
  /** Share of documents in the validation split, in (0, 1). */
  readonly validationFraction: number
  /** @default 0 */
  readonly seed?: number
}

/** Train and validation splits by hashed id: a document's split never depends on the rest of the dataset. */
export function split(
  name: string,
  opts: SplitOptions,
): { train: Dataset<DatakitRecord>; validation: Dataset<DatakitRecord> } {
  const f = opts.validationFraction
  if (!(f > 0 && f < 1))
    throw new DatakitError('INVALID_ARGUMENT', `split ${name}: validationFraction must be in (0, 1), got ${f}`)
  const seed = opts.seed ?? 0
  const ds = fromDatakit(name, opts)
  return {
    train: ds.filter(ID_UNIT_IN, { args: { seed, from: f, to: 1 } }),
    validation: ds.filter(ID_UNIT_IN, { args: { seed, from: 0, to: f } }),
  }
}
