/**
 * @module Resolving `name[@version]` to a dataset version and its shards on local disk.
 * Unknown names and versions fail with the list of what exists.
 */
import { existsSync, statSync } from 'node:fs'
import { join } from 'node:path'
import type { JsonObject, LineageEntry, Store } from '@marin/finestore'
import { MARIN_LAYOUT } from '@marin/rigging'
import { DatakitError } from '../errors.js'
import { datasetArtifact, resolvePrefix, withStore } from '../store.js'
import type { StoreAccess } from '../store.js'
import { toUrl } from './source-files.js'

export type OpenOptions = StoreAccess & {
  /** A version number; the latest when omitted. */
  readonly version?: number
}

/** A resolved dataset version. `shards` are local Parquet files, verified against their hashes. */
export type DatasetVersion = {
  readonly name: string
  readonly version: number
  readonly ref: string
  readonly metadata: JsonObject
  readonly config: JsonObject
  readonly lineage: readonly LineageEntry[]
  readonly createdAt: string
  /** Local file URLs of the Parquet shards, in order. */
  readonly shards: readonly string[]
}

/** Splits `NAME[@VERSION]`; NAME may be bare (`brown`) or as finestore names it (`datasets/brown`). */
export function parseDatasetRef(ref: string): { name: string; version?: number } {
  const at = ref.lastIndexOf('@')
  if (at < 0) return { name: ref }
  const v = Number(ref.slice(at + 1))
  if (!Number.isInteger(v) || v < 1)
    throw new DatakitError(
      'INVALID_ARGUMENT',
      `"${ref}": the version after @ must be a positive integer, e.g. ${ref.slice(0, at)}@1`,
    )
  return { name: ref.slice(0, at), version: v }
}

/** Names of all datasets in the store. */
export async function datasetNames(store: Store, kind = 'datasets'): Promise<string[]> {
  return (await store.artifacts(`${kind}/`)).map((a) => a.slice(kind.length + 1)).sort()
}

/** The version number `opts.version` (or the latest) of `artifact`, or an error listing what exists. */
export async function resolveVersion(
  store: Store,
  artifact: string,
  version: number | undefined,
  kind = 'datasets',
): Promise<number> {
  const head = await store.head(artifact)
  if (head === undefined) {
    const names = (await datasetNames(store, kind)).map((n) => `${kind}/${n}`)
    throw new DatakitError(
      'DATASET_NOT_FOUND',
      `no ${kind === 'datasets' ? 'dataset' : 'token cache'} "${artifact}"; ` +
        `${names.length ? `existing: ${names.join(', ')}` : 'the store has none yet; create one first'}`,
    )
  }
  if (version === undefined) return head
  const versions = await store.versions(artifact)
  if (!versions.includes(version)) {
    throw new DatakitError(
      'VERSION_NOT_FOUND',
      `${kind === 'datasets' ? 'dataset' : 'token cache'} "${artifact}" ` +
        `has no version ${version}; existing versions: ` +
        `${versions.join(', ')}`,
    )
  }
  return version
}

/** Resolves a dataset version and makes its shards available locally (copied once, named by content hash). */
export async function openDataset(name: string, opts: OpenOptions = {}): Promise<DatasetVersion> {
  return withStore(opts, async (store) => {
    const artifact = datasetArtifact(name)
    const version = await resolveVersion(store, artifact, opts.version)
    const view = await store.open(`${artifact}@${version}`)
    const cache = join(resolvePrefix(opts.prefix), MARIN_LAYOUT.datakitCache)
    const shards: string[] = []
    for (const f of view.files().filter((p) => p.endsWith('.parquet'))) {
      const local = join(cache, `${view.entry(f).blob}.parquet`)
      // A copy is made once and verified then; one of the wrong size (cut short) is fetched again.
      if (!existsSync(local) || statSync(local).size !== view.entry(f).size) await view.copyTo(f, local)
      shards.push(toUrl(local))
    }
    return {
      name,
      version,
      ref: view.ref,
      metadata: view.metadata,
      config: view.config,
      lineage: view.lineage,
      createdAt: view.manifest.createdAt,
      shards,
    }
  })
}
