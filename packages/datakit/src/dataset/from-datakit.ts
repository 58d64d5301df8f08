/**
 * @module `Dataset.fromDatakit(name)`: a zephyr Dataset over a datakit dataset version
 * (the latest unless pinned), so a training run names a dataset and reads the same bytes
 * every time. It is synchronous because a zephyr Dataset cannot be the value of a
 * promise (it has a `then` method): the version is resolved from the store's manifests on
 * local disk (the layout in ARCHITECTURE.md), and each shard task fetches its Parquet
 * shard through finestore, verified against its hash, when the plan runs.
 *
 * @example
 * const ds = Dataset.fromDatakit('brown', { version: 3 })
 * const { results } = await new ZephyrContext().execute(ds.map((r) => r.text.length))
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { parseManifest } from '@marin/finestore'
import type { Manifest } from '@marin/finestore'
import { MARIN_LAYOUT } from '@marin/rigging'
import { Dataset as ZephyrDataset } from '@marin/zephyr'
import { DatakitError } from '../errors.js'
import { bareName, isLocalPrefix, prefixLocation, resolvePrefix } from '../store.js'
import type { OpenOptions } from './open-dataset.js'
import type { DatakitRecord } from './record.js'
import { READ_DATAKIT_SHARDS } from './shard-fns.js'
import type { PinnedDataset } from './shard-fns.js'

/** The manifest of a dataset version, read synchronously from a local store; errors list what exists. */
export function readManifestSync(name: string, opts: OpenOptions = {}, kind = 'datasets'): Manifest {
  if (!isLocalPrefix(opts.prefix))
    throw new DatakitError(
      'INVALID_ARGUMENT',
      `${kind}/${bareName(name, kind)}: the prefix ${prefixLocation(opts.prefix)} is not a local folder, and ` +
        'fromDatakit and sample read the manifest synchronously from one; use openDataset, or a local prefix',
    )
  const root = join(resolvePrefix(opts.prefix), MARIN_LAYOUT.store, 'artifacts')
  const artifact = `${kind}/${bareName(name, kind)}`
  const dir = join(root, artifact, 'versions')
  const label = kind === 'datasets' ? 'dataset' : 'token cache'
  if (!existsSync(dir)) {
    const names = existsSync(join(root, kind)) ? readdirSync(join(root, kind)).sort() : []
    const existing = names.map((n) => `${kind}/${n}`).join(', ')
    throw new DatakitError(
      'DATASET_NOT_FOUND',
      `no ${label} "${artifact}" under ${root}; ` +
        `${names.length ? `existing: ${existing}` : 'the store has none yet; create one first'}`,
    )
  }
  const versions = readdirSync(dir)
    .map((f) => /^(\d+)\.json$/.exec(f)?.[1])
    .filter((v) => v !== undefined)
    .map(Number)
    .sort((a, b) => a - b)
  const version = opts.version ?? versions.at(-1)
  if (version === undefined || !versions.includes(version)) {
    throw new DatakitError(
      'VERSION_NOT_FOUND',
      `${label} "${artifact}" has no version ${String(version)}; existing ` +
        `versions: ${versions.join(', ') || '(none)'}`,
    )
  }
  const path = join(dir, `${version}.json`)
  return parseManifest(readFileSync(path, 'utf8'), path)
}

/** The records of dataset `name` (one zephyr shard per Parquet shard). */
export function fromDatakit(name: string, opts: OpenOptions = {}): ZephyrDataset<DatakitRecord> {
  if (opts.store)
    throw new DatakitError(
      'INVALID_ARGUMENT',
      `fromDatakit ${name}: pass prefix, not store; the plan opens the store itself when it runs`,
    )
  const m = readManifestSync(name, opts)
  const shards = Object.keys(m.files)
    .filter((f) => f.endsWith('.parquet'))
    .sort()
  const pinned: PinnedDataset = { name, prefix: resolvePrefix(opts.prefix), version: m.version }
  // the shards are resolved when the plan runs, once per worker process
  return ZephyrDataset.fromList(
    shards.map((_, i) => i),
    { numShards: shards.length },
  ).mapShard(READ_DATAKIT_SHARDS, { args: pinned })
}

/** zephyr's `Dataset`, with `fromDatakit` added. */
export const Dataset: typeof ZephyrDataset & { readonly fromDatakit: typeof fromDatakit } = Object.assign(
  Object.create(ZephyrDataset) as typeof ZephyrDataset,
  { fromDatakit },
)
/** A zephyr dataset of records of type `T`. */
export type Dataset<T> = ZephyrDataset<T>
