/**
 * @module Where a URL lives: the storage it belongs to and the object path inside it.
 *
 * A plain path (`/data/x.jsonl`, `out/part.jsonl`) is a `file://` URL. `file://`
 * storages are opened at the filesystem root so that any two local paths share
 * one storage; other schemes are opened at `scheme://authority` (the bucket).
 * Storages are cached per root, so a pipeline opens each bucket once.
 */
import { resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { openStorage } from '@marin/rigging'
import type { Storage } from '@marin/rigging'

export type Location = {
  readonly storage: Storage
  /** Object path inside the storage (no leading `/`). */
  readonly path: string
  /** The full URL, normalized. */
  readonly url: string
}

const cache = new Map<string, Promise<Storage>>()

/** Splits a URL or local path into its storage root URL and object path. */
export function splitUrl(urlOrPath: string): { root: string; path: string; url: string } {
  const m = /^([a-z][a-z0-9+.-]*):\/\/([^/]*)(\/.*)?$/i.exec(urlOrPath)
  if (!m || m[1]!.toLowerCase() === 'file') {
    const abs = m ? decodeURIComponent(new URL(urlOrPath).pathname) : resolve(urlOrPath)
    const trailing = urlOrPath.endsWith('/') && !abs.endsWith('/') ? '/' : ''
    return { root: 'file:///', path: abs.replace(/^\/+/, '') + trailing, url: pathToFileURL(abs).href + trailing }
  }
  const root = `${m[1]!.toLowerCase()}://${m[2]}`
  const path = (m[3] ?? '').replace(/^\/+/, '')
  return { root, path, url: `${root}/${path}` }
}

/** Joins a storage root and an object path back into a URL. */
export function joinUrl(root: string, path: string): string {
  return root.endsWith('/') ? `${root}${path}` : `${root}/${path}`
}

export async function storageAt(root: string): Promise<Storage> {
  let s = cache.get(root)
  if (!s) {
    s = openStorage(root)
    cache.set(root, s)
    s.catch(() => cache.delete(root))
  }
  return s
}

export async function locate(urlOrPath: string): Promise<Location> {
  const { root, path, url } = splitUrl(urlOrPath)
  return { storage: await storageAt(root), path, url }
}
