/**
 * @module Checking every blob of a store against its hash, and repairing the
 * damaged ones from good copies.
 *
 * `verifyStore` rehashes each blob (streamed), finds the blobs manifests name
 * but storage lacks, and says which versions and files each damaged blob
 * breaks. With `repairFrom` it hashes the files of a local folder (a backup, a
 * copy of the inputs) and puts back every damaged or missing blob whose bytes
 * it finds there, through the same verified put that commits use.
 */
import { createHash } from 'node:crypto'
import { createReadStream } from 'node:fs'
import { readdir, stat } from 'node:fs/promises'
import { join } from 'node:path'
import type { Storage } from '@marin/rigging'
import type { BlobStore } from './blob-store.js'
import { isNotFound } from './internal/storage-errors.js'
import { BLOBS_PREFIX, blobPath, parseBlobPath } from './layout.js'
import { parseManifest } from './manifest.js'
import { formatRef } from './names.js'
import { scanArtifacts } from './scan.js'

export type VerifyOptions = {
  /** A local folder whose files (any names, any depth) are hashed to restore damaged or missing blobs. */
  readonly repairFrom?: string
  /** Called once the blobs are listed. */
  readonly onStart?: (blobs: number, bytes: number) => void
  /** Called after each blob with the count and bytes checked so far. */
  readonly onProgress?: (done: number, bytes: number) => void
}

/** A file of a version that needs a blob. */
export type BlobUse = {
  readonly artifact: string
  readonly version: number
  readonly ref: string
  readonly file: string
}

export type DamagedBlob = {
  readonly hash: string
  /** `corrupt`: its bytes hash to something else; `missing`: a manifest names it, storage lacks it. */
  readonly problem: 'corrupt' | 'missing'
  /** Size of the stored (damaged) bytes, for a corrupt blob. */
  readonly storedSize?: number
  /** What the stored bytes hash to, for a corrupt blob. */
  readonly actualHash?: string
  /** Size the manifests expect, when a manifest names the blob. */
  readonly expectedSize?: number
  /** The versions and files it breaks (none for an unreferenced blob). */
  readonly usedBy: readonly BlobUse[]
}

export type VerifyReport = {
  readonly blobsChecked: number
  readonly bytesChecked: number
  readonly intact: number
  /** Damaged blobs still damaged after any repair. */
  readonly damaged: readonly DamagedBlob[]
  /** Blobs restored from `repairFrom`, with the file they came from. */
  readonly repaired: readonly (DamagedBlob & { readonly from: string })[]
  /** `name@version` of every version a still damaged blob breaks. */
  readonly brokenVersions: readonly string[]
  /** Manifests that could not be read: the blobs they name were not checked for being missing. */
  readonly unreadableManifests: readonly { readonly path: string; readonly error: string }[]
}

export async function verifyStore(storage: Storage, blobs: BlobStore, opts: VerifyOptions = {}): Promise<VerifyReport> {
  const listed: { hash: string; size: number }[] = []
  for await (const info of storage.list(BLOBS_PREFIX)) {
    const hash = parseBlobPath(info.path)
    if (hash) listed.push({ hash, size: info.size })
  }
  const { uses, sizes, unreadable } = await blobUses(storage)

  const total = listed.reduce((s, b) => s + b.size, 0)
  opts.onStart?.(listed.length, total)
  const damaged = new Map<string, DamagedBlob>()
  let intact = 0
  let bytes = 0
  const present = new Set<string>()
  for (const [i, b] of listed.entries()) {
    const found = await blobs.inspect(b.hash)
    if (found.state !== 'missing') present.add(b.hash)
    if (found.state === 'intact') intact++
    else if (found.state === 'corrupt') damaged.set(b.hash, describe(b.hash, found, uses, sizes))
    // Gone since the listing: collected by gc if no version uses it, else missing (checked below).
    bytes += b.size
    opts.onProgress?.(i + 1, bytes)
  }
  for (const hash of uses.keys()) {
    if (present.has(hash)) continue
    // Created since the listing (a commit landing now) is not missing.
    if (await storage.exists(blobPath(hash))) continue
    damaged.set(hash, describe(hash, undefined, uses, sizes))
  }

  const repaired: (DamagedBlob & { from: string })[] = []
  if (opts.repairFrom !== undefined && damaged.size > 0) {
    for await (const file of walk(opts.repairFrom)) {
      const expected = [...damaged.values()].some((d) => d.expectedSize === undefined || d.expectedSize === file.size)
      if (!expected) continue
      const hash = await hashFile(file.path)
      const d = damaged.get(hash)
      if (!d) continue
      const r = await blobs.put({ file: file.path })
      await blobs.discard(r.retained)
      if (r.hash !== hash || (await blobs.inspect(hash)).state !== 'intact') continue // changed under us
      damaged.delete(hash)
      repaired.push({ ...d, from: file.path })
      if (damaged.size === 0) break
    }
  }

  const still = [...damaged.values()].sort((a, b) => (a.hash < b.hash ? -1 : 1))
  const brokenVersions = [...new Set(still.flatMap((d) => d.usedBy.map((u) => u.ref)))].sort()
  return {
    blobsChecked: listed.length,
    bytesChecked: bytes,
    intact,
    damaged: still,
    repaired,
    brokenVersions,
    unreadableManifests: unreadable,
  }
}

function describe(
  hash: string,
  corrupt: { size: number; actualHash: string } | undefined,
  uses: Map<string, BlobUse[]>,
  sizes: Map<string, number>,
): DamagedBlob {
  const expectedSize = sizes.get(hash)
  return {
    hash,
    problem: corrupt ? 'corrupt' : 'missing',
    ...(corrupt ? { storedSize: corrupt.size, actualHash: corrupt.actualHash } : {}),
    ...(expectedSize !== undefined ? { expectedSize } : {}),
    usedBy: uses.get(hash) ?? [],
  }
}

/** Which version files use each blob, and the size manifests give it. */
async function blobUses(storage: Storage): Promise<{
  uses: Map<string, BlobUse[]>
  sizes: Map<string, number>
  unreadable: { path: string; error: string }[]
}> {
  const uses = new Map<string, BlobUse[]>()
  const sizes = new Map<string, number>()
  const unreadable: { path: string; error: string }[] = []
  const scan = await scanArtifacts(storage)
  const manifests = [...scan.manifests].sort((a, b) =>
    a.artifact === b.artifact ? a.version - b.version : a.artifact < b.artifact ? -1 : 1,
  )
  for (const m of manifests) {
    let manifest
    try {
      manifest = parseManifest(await storage.readText(m.path), m.path)
    } catch (err) {
      if (isNotFound(err)) continue
      unreadable.push({ path: m.path, error: (err as Error).message })
      continue
    }
    for (const [file, f] of Object.entries(manifest.files).sort(([a], [b]) => (a < b ? -1 : 1))) {
      const list = uses.get(f.blob) ?? []
      list.push({
        artifact: manifest.artifact,
        version: manifest.version,
        ref: formatRef(manifest.artifact, manifest.version),
        file,
      })
      uses.set(f.blob, list)
      sizes.set(f.blob, f.size)
    }
  }
  return { uses, sizes, unreadable }
}

/** Regular files under `dir`, at any depth (symbolic links are followed to files, not folders). */
async function* walk(dir: string): AsyncIterable<{ path: string; size: number }> {
  const entries = await readdir(dir, { withFileTypes: true })
  entries.sort((a, b) => (a.name < b.name ? -1 : 1))
  for (const e of entries) {
    const path = join(dir, e.name)
    if (e.isDirectory()) yield* walk(path)
    else if (e.isFile() || e.isSymbolicLink()) {
      const st = await stat(path).catch(() => undefined)
      if (st?.isFile()) yield { path, size: st.size }
    }
  }
}

async function hashFile(path: string): Promise<string> {
  const h = createHash('sha256')
  for await (const chunk of createReadStream(path, { highWaterMark: 512 << 10 }) as AsyncIterable<Buffer>)
    h.update(chunk)
  return h.digest('hex')
}
