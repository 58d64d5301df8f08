/** @module The one error class of @marin/dupekit, with codes from a closed set. */

export const DUPEKIT_ERROR_CODES = [
  /** A parameter is out of range or inconsistent (permutations, bands, n-gram size, sizes). */
  'INVALID_ARGUMENT',
  /** Two Bloom filters of different shapes were combined. */
  'BLOOM_MISMATCH',
  /** A saved Bloom filter is shorter than its header says. */
  'BLOOM_TRUNCATED',
  /** A saved Bloom filter fails its checksum or has an impossible header. */
  'BLOOM_CORRUPT',
  /** A file is not a saved Bloom filter, or of a format version this code does not read. */
  'BLOOM_FORMAT',
  /** A saved Bloom filter could not be read or written. */
  'BLOOM_IO',
  /** A worker thread of a MinHash pool failed or the pool was closed. */
  'POOL_FAILED',
] as const

export type DupekitErrorCode = (typeof DUPEKIT_ERROR_CODES)[number]

/**
 * Every failure dupekit reports. `code` is stable and safe to branch on;
 * the message says what failed, on what, and what to do.
 */
export class DupekitError extends Error {
  override name = 'DupekitError'
  constructor(
    readonly code: DupekitErrorCode,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options)
  }
}

export function isDupekitError(err: unknown, code?: DupekitErrorCode): err is DupekitError {
  return err instanceof DupekitError && (code === undefined || err.code === code)
}
