/**
 * @module Where finestore keeps each object under the store root (see the
 * "Storage layout under the prefix" section of ARCHITECTURE.md):
 *
 * ```
 * blobs/sha256/ab/ab12…                 content-addressed bytes (file name = the full hash)
 * artifacts/<name>/HEAD                 {"version": n}, moved forward by compare-and-swap
 * artifacts/<name>/versions/<n>.json    immutable manifest; its creation is the commit point
 * artifacts/<name>/tags/<tag>.json      {"version": n}, moved by compare-and-swap
 * txns/<id>.json                        blobs an open transaction has staged (GC pins)
 * tmp/<id>                              bytes being uploaded, before they get their hash name
 * gc/state.json                         the garbage collector's epoch (odd while it runs)
 * catalog.sqlite                        the SQLite index, rebuildable from the above
 * ```
 */

export const BLOBS_PREFIX = 'blobs/sha256/'
export const ARTIFACTS_PREFIX = 'artifacts/'
export const TXNS_PREFIX = 'txns/'
export const TMP_PREFIX = 'tmp/'
export const GC_STATE_PATH = 'gc/state.json'
export const CATALOG_FILE = 'catalog.sqlite'

export const blobPath = (hash: string): string => `${BLOBS_PREFIX}${hash.slice(0, 2)}/${hash}`
export const headPath = (artifact: string): string => `${ARTIFACTS_PREFIX}${artifact}/HEAD`
export const manifestPath = (artifact: string, version: number): string =>
  `${ARTIFACTS_PREFIX}${artifact}/versions/${version}.json`
export const tagPath = (artifact: string, tag: string): string => `${ARTIFACTS_PREFIX}${artifact}/tags/${tag}.json`
export const versionsPrefix = (artifact: string): string => `${ARTIFACTS_PREFIX}${artifact}/versions/`
export const tagsPrefix = (artifact: string): string => `${ARTIFACTS_PREFIX}${artifact}/tags/`
export const pinPath = (txnId: string): string => `${TXNS_PREFIX}${txnId}.json`
export const tmpPath = (id: string): string => `${TMP_PREFIX}${id}`

/** What a path found by listing `artifacts/` is. */
export type ArtifactObject =
  | { readonly type: 'head'; readonly artifact: string }
  | { readonly type: 'manifest'; readonly artifact: string; readonly version: number }
  | { readonly type: 'tag'; readonly artifact: string; readonly tag: string }

const MANIFEST_RE = /^artifacts\/(.+)\/versions\/([1-9][0-9]*)\.json$/
const TAG_RE = /^artifacts\/(.+)\/tags\/([^/]+)\.json$/
const HEAD_RE = /^artifacts\/(.+)\/HEAD$/
const BLOB_RE = /^blobs\/sha256\/([0-9a-f]{2})\/([0-9a-f]{64})$/

/** Classifies a listed path under `artifacts/`; `undefined` for anything finestore did not write. */
export function parseArtifactPath(path: string): ArtifactObject | undefined {
  let m = MANIFEST_RE.exec(path)
  if (m) return { type: 'manifest', artifact: m[1]!, version: Number(m[2]) }
  m = TAG_RE.exec(path)
  if (m) return { type: 'tag', artifact: m[1]!, tag: m[2]! }
  m = HEAD_RE.exec(path)
  if (m) return { type: 'head', artifact: m[1]! }
  return undefined
}

/** The hash of a listed blob path, or `undefined` when the path is not a well-formed blob. */
export function parseBlobPath(path: string): string | undefined {
  const m = BLOB_RE.exec(path)
  return m && m[2]!.startsWith(m[1]!) ? m[2] : undefined
}
