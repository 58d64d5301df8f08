/** @module @marin/finestore: versioned artifact store: content-addressed blobs, immutable manifests, compare-and-swap HEAD, lineage, SQLite catalog, GC. */
import pkg from '../package.json' with { type: 'json' }

export const name: string = pkg.name
export const version: string = pkg.version
