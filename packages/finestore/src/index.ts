/** @module @marin/finestore: versioned artifact store: content-addressed blobs, immutable manifests, compare-and-swap
 * HEAD, lineage, SQLite catalog, GC. */
import pkg from '../package.json' with { type: 'json' }

export const name: string = pkg.name
export const version: string = pkg.version

// The store
export { Store, openStore, storeUrl } from './store.js'
export type { CommitOptions, StoreOptions, VersionRef } from './store.js'
export type { RebuildReport, SyncReport } from './catalog-sync.js'
export { Transaction } from './transaction.js'
export type { CommitResult, TransactionOptions } from './transaction.js'
export { ArtifactView } from './view.js'
export type { MaterializeOptions } from './materialize.js'

// Errors
export { ConflictError, FINESTORE_ERROR_CODES, FinestoreError, IntegrityError, isFinestoreError } from './errors.js'
export type { FinestoreErrorCode } from './errors.js'

// Blobs and cache
export { BlobStore, checkHash } from './blob-store.js'
export type { BlobInfo, BlobSource, BlobState, BlobStoreOptions, ReadContext } from './blob-store.js'
export { BlobCache } from './cache.js'
export type { BlobCacheOptions, CacheStats } from './cache.js'

// Manifests, names, schemas
export { FileEntry, LineageEntry, Manifest, parseManifest, serializeManifest } from './manifest.js'
export type { JsonObject } from './manifest.js'
export { LATEST, checkArtifactName, checkFilePath, checkTagName, formatRef, parseRef } from './names.js'
export type { ArtifactRef } from './names.js'
export { SchemaRegistry, defaultKind } from './schemas.js'

// How the CLIs print: aligned tables and byte sizes (datakit's CLI prints the same way)
export { table as formatTable } from './cli-format.js'
export { formatBytes } from './progress.js'

// Catalog, gc and verification
export { Catalog } from './catalog.js'
export type { ArtifactRow, LineageRow, MetadataCondition, SearchQuery, VersionRow } from './catalog.js'
export { GC_DEFAULTS, collectGarbage } from './gc.js'
export type { GcOptions, GcReport } from './gc.js'
export type { ExpiredPin, PinReport } from './pins.js'
export type { BlobUse, DamagedBlob, VerifyOptions, VerifyReport } from './verify.js'
