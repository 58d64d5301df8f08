/** @module Where datakit keeps its datasets: a finestore store under the Marin prefix, plus a local work folder. */
import { resolve } from 'node:path'
import { openStore, storeUrl } from '@marin/finestore'
import type { Store } from '@marin/finestore'

/** How a datakit call finds its store. */
export type StoreAccess = {
  /** An open store; when given, `prefix` is used only for the work folder. */
  readonly store?: Store
  /** Local Marin prefix. @default $MARIN_PREFIX, then ./.marin */
  readonly prefix?: string
}

/** Artifact name of dataset `name` in finestore. */
export function datasetArtifact(name: string): string {
  return `datasets/${name}`
}

/** Artifact name of token cache `name` in finestore. */
export function cacheArtifact(name: string): string {
  return `token-caches/${name}`
}

/** The local prefix: option, then `$MARIN_PREFIX`, then `./.marin`. */
export function resolvePrefix(prefix?: string): string {
  return resolve(prefix ?? process.env.MARIN_PREFIX ?? '.marin')
}

/** Opens the store of `access`; `close` closes it only when this call opened it. */
export async function withStore<R>(access: StoreAccess, fn: (store: Store) => Promise<R>): Promise<R> {
  if (access.store) return fn(access.store)
  const store = await openStore({ url: storeUrl(resolvePrefix(access.prefix)) })
  try {
    return await fn(store)
  } finally {
    store.close()
  }
}

/** A local folder for resumable intermediate work, keyed by what is being built. */
export function workDir(access: StoreAccess, ...parts: string[]): string {
  return resolve(resolvePrefix(access.prefix), 'datakit-work', ...parts)
}
