/** @module Where datakit keeps its datasets: a finestore store under the Marin prefix, plus a local work folder. */
import { join } from 'node:path'
import { openStore } from '@marin/finestore'
import { localMarinPrefix, MARIN_LAYOUT, prefixPath, prefixUrl } from '@marin/rigging'
import type { Store } from '@marin/finestore'

/** How a datakit call finds its store. */
export type StoreAccess = {
  /** An open store; when given, `prefix` is used only for the work folder. */
  readonly store?: Store
  /** Local Marin prefix. @default $MARIN_PREFIX, then ./.marin */
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

/** The local prefix folder: option, then `$MARIN_PREFIX`, then `./.marin` (see rigging's `marinPrefix`). */
export function resolvePrefix(prefix?: string): string {
  return localMarinPrefix({ prefix })
}

/** Opens the store of `access`; `close` closes it only when this call opened it. */
export async function withStore<R>(access: StoreAccess, fn: (store: Store) => Promise<R>): Promise<R> {
  if (access.store) return fn(access.store)
  const store = await openStore({ url: prefixPath(prefixUrl(resolvePrefix(access.prefix)), MARIN_LAYOUT.store) })
  try {
    return await fn(store)
  } finally {
    store.close()
  }
}

/** A local folder for resumable intermediate work, keyed by what is being built. */
export function workDir(access: StoreAccess, ...parts: string[]): string {
  return join(resolvePrefix(access.prefix), MARIN_LAYOUT.datakitWork, ...parts)
}
