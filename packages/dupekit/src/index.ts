/** @module @marin/dupekit: dedup kernels: xxh3/xxh64 hashing, exact keys, MinHash, LSH banding, union-find clustering, Bloom filters. */
import pkg from '../package.json' with { type: 'json' }

export const name: string = pkg.name
export const version: string = pkg.version
