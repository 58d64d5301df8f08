/**
 * @module Where datakit keeps its datasets: a finestore store under the Marin prefix, plus a local folder for
 * resumable work and verified copies of shards.
 *
 * The prefix is a local folder or a storage URL (`s3://`, `gs://`, `file://`, `memory://`; see rigging's
 * `marinPrefix`). The store is always opened at `<prefix>/store` through finestore's storage, so datasets made on
 * one machine are read on another when the prefix is an object store. Work folders and shard copies are local:
 * under the prefix itself when it is a folder, else under a folder of this machine named for the prefix
 * (`prefixLocalDir`): what is there is scratch or a copy checked against its hash, so losing it costs only time.
 */
import { createHash } from 'node:crypto'
import { tmpdir } from 'node:os'
import { isAbsolute, join, relative, resolve, sep } from 'node:path'
import { openStore, storeUrl } from '@marin/finestore'
import { MARIN_LAYOUT, marinPrefix, prefixDir } from '@marin/rigging'
import type { Store } from '@marin/finestore'
import { DatakitError } from './errors.js'

/** How a datakit call finds its store. */
export type StoreAccess = {
  /** An open store; when given, `prefix` is used only for the work folder. */
  readonly store?: Store
  /** Marin prefix: a local folder or a storage URL (`s3://bucket/marin`). @default $MARIN_PREFIX, then ./.marin */
  readonly prefix?: string
}

/**
 * The bare name of an artifact of `kind` given bare (`brown`) or as finestore names it
 * (`datasets/brown`): every datakit call and command takes either.
 */
export function bareName(name: string, kind = 'datasets'): string {
  return name.startsWith(`${kind}/`) ? name.slice(kind.length + 1) : name
}

/** Artifact name of dataset `name` (bare or `datasets/…`) in finestore. */
export function datasetArtifact(name: string): string {
  return `datasets/${bareName(name)}`
}

/** Artifact name of token cache `name` (bare or `token-caches/…`) in finestore. */
export function cacheArtifact(name: string): string {
  return `token-caches/${bareName(name, 'token-caches')}`
}

/** The prefix as a storage URL: option, then `$MARIN_PREFIX`, then `./.marin` (`file:///…` for a local folder). */
export function prefixLocation(prefix?: string): string {
  return marinPrefix({ prefix })
}

/** Whether the prefix is a local folder (a path or `file://`), not an object store or memory. */
export function isLocalPrefix(prefix?: string): boolean {
  return prefixDir(prefixLocation(prefix)) !== undefined
}

/**
 * The local folder of a prefix that is not one: `<tmpdir>/marin-prefix-<hash>`, `<hash>` the first 16 hex digits of
 * the SHA-256 of its URL, so two prefixes never share work and one prefix always finds its own again.
 */
export function prefixLocalDir(url: string): string {
  return join(tmpdir(), `marin-prefix-${createHash('sha256').update(url).digest('hex').slice(0, 16)}`)
}

/**
 * The local folder of the prefix, for work and copies that must be on this machine: the prefix's own folder
 * when it is local (option, then `$MARIN_PREFIX`, then `./.marin`), else `prefixLocalDir` of its URL.
 */
export function resolvePrefix(prefix?: string): string {
  const url = prefixLocation(prefix)
  return prefixDir(url) ?? prefixLocalDir(url)
}

/** Opens the store of `access`; `close` closes it only when this call opened it. */
export async function withStore<R>(access: StoreAccess, fn: (store: Store) => Promise<R>): Promise<R> {
  if (access.store) return fn(access.store)
  const store = await openStore({ url: storeUrl(prefixLocation(access.prefix)) })
  try {
    return await fn(store)
  } finally {
    store.close()
  }
}

/**
 * A local folder for resumable intermediate work, keyed by what is being built; it stays inside the work folder
 * of the prefix (a part such as `..` or an absolute path is refused).
 */
export function workDir(access: StoreAccess, ...parts: string[]): string {
  const root = join(resolvePrefix(access.prefix), MARIN_LAYOUT.datakitWork)
  const dir = resolve(root, ...parts)
  const rel = relative(root, dir)
  if (rel === '..' || rel.startsWith(`..${sep}`) || isAbsolute(rel))
    throw new DatakitError(
      'INVALID_ARGUMENT',
      `work folder ${JSON.stringify(parts.join('/'))} leaves ${root}; name datasets without ".." or a leading "/"`,
    )
  return dir
}
