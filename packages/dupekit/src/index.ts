/** @module @marin/dupekit: dedup kernels: xxh3/xxh64 hashing, exact keys, MinHash, LSH banding, union-find clustering,
 * Bloom filters. */
import pkg from '../package.json' with { type: 'json' }

export const name: string = pkg.name
export const version: string = pkg.version

export { DUPEKIT_ERROR_CODES, DupekitError, isDupekitError } from './errors.js'
export type { DupekitErrorCode } from './errors.js'
export { normalizeText } from './normalize.js'
export type { NormalizeOptions } from './normalize.js'
export { hashHex, xxh128, xxh128Batch, xxh3, xxh3Batch, xxh64, xxh64Batch } from './hash.js'
export type { HashInput } from './hash.js'
export { exactKey, exactKeys } from './exact-key.js'
export { estimateJaccard, MINHASH_DEFAULTS, MinHasher, minhashSignature, resolveMinHashParams } from './minhash.js'
export type { MinHashOptions, MinHashParams, ShingleKind } from './minhash.js'
export { MinHashPool } from './minhash-pool.js'
export type { MinHashPoolOptions } from './minhash-pool.js'
export { LshIndex, lshProbability, lshThreshold } from './lsh.js'
export type { LshOptions } from './lsh.js'
export { UnionFind } from './union-find.js'
export { findDuplicateClusters } from './find-duplicates.js'
export type { DuplicateClusters, FindDuplicatesOptions } from './find-duplicates.js'
export { BLOOM_MAX_BITS, BloomFilter, bloomSize } from './bloom.js'
export type { BloomOptions } from './bloom.js'
export { BLOOM_FORMAT_VERSION, BLOOM_MAGIC, bloomFromBytes, bloomToBytes, loadBloom, saveBloom } from './bloom-file.js'
