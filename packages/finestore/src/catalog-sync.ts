/**
 * @module Filling the catalog from storage, the source of truth: a full rebuild,
 * or an incremental sync that adds what other processes or machines committed.
 */
import type { Storage } from '@marin/rigging'
import type { Catalog } from './catalog.js'
import { readPointer } from './heads.js'
import { parseManifest } from './manifest.js'
import type { Manifest } from './manifest.js'
import { scanArtifacts } from './scan.js'

/** What `rebuildCatalog` found in storage. */
export type RebuildReport = {
  readonly artifacts: number
  readonly versions: number
  readonly tags: number
  /** Manifests that could not be parsed; they are left out of the catalog and named here. */
  readonly unreadable: readonly { readonly path: string; readonly error: string }[]
}

export type SyncReport = {
  readonly added: number
  readonly unreadable: readonly { readonly path: string; readonly error: string }[]
}

async function readManifest(
  storage: Storage,
  m: { artifact: string; version: number; path: string },
): Promise<Manifest> {
  return parseManifest(await storage.readText(m.path), m.path, { artifact: m.artifact, version: m.version })
}

async function readTags(storage: Storage, tags: readonly { artifact: string; tag: string; path: string }[]) {
  const out: { artifact: string; tag: string; version: number }[] = []
  for (const t of tags) {
    const p = await readPointer(storage, t.path).catch(() => undefined)
    if (p) out.push({ artifact: t.artifact, tag: t.tag, version: p.version })
  }
  return out
}

/** Replaces the whole catalog with what storage holds. Unparsable manifests are reported, not fatal. */
export async function rebuildCatalog(storage: Storage, catalog: Catalog): Promise<RebuildReport> {
  const scan = await scanArtifacts(storage)
  const ok: Manifest[] = []
  const unreadable: { path: string; error: string }[] = []
  for (const m of scan.manifests) {
    try {
      ok.push(await readManifest(storage, m))
    } catch (err) {
      unreadable.push({ path: m.path, error: (err as Error).message })
    }
  }
  const tags = await readTags(storage, scan.tags)
  catalog.replaceAll(ok, tags)
  return { artifacts: scan.artifacts.size, versions: ok.length, tags: tags.length, unreadable }
}

/** Adds the versions and tags storage has and the catalog lacks. */
export async function syncCatalog(storage: Storage, catalog: Catalog): Promise<SyncReport> {
  const scan = await scanArtifacts(storage)
  const missing: Manifest[] = []
  const unreadable: { path: string; error: string }[] = []
  for (const m of scan.manifests) {
    if (catalog.version(m.artifact, m.version)) continue
    try {
      missing.push(await readManifest(storage, m))
    } catch (err) {
      unreadable.push({ path: m.path, error: (err as Error).message })
    }
  }
  catalog.indexVersions(missing)
  for (const t of await readTags(storage, scan.tags)) catalog.setTag(t.artifact, t.tag, t.version)
  return { added: missing.length, unreadable }
}
