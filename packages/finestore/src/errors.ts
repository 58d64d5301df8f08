/** @module The one error class of @marin/finestore, with codes from a closed set, and the two refinements callers
 * branch on. */

export const FINESTORE_ERROR_CODES = [
  'INVALID_NAME',
  'INVALID_REF',
  'INVALID_PATH',
  'INVALID_HASH',
  'INVALID_INPUT',
  'NOT_FOUND',
  'CONFLICT',
  'INTEGRITY',
  'MANIFEST_INVALID',
  'METADATA_INVALID',
  'TXN_CLOSED',
  'GC_RUNNING',
] as const

export type FinestoreErrorCode = (typeof FINESTORE_ERROR_CODES)[number]

/**
 * Every failure finestore reports. `code` is stable and safe to branch on;
 * `retryable` says whether running the same operation again can succeed.
 */
export class FinestoreError extends Error {
  override name = 'FinestoreError'
  constructor(
    readonly code: FinestoreErrorCode,
    message: string,
    readonly retryable = false,
    options?: ErrorOptions,
  ) {
    super(message, options)
  }
}

/**
 * Bytes no longer match their sha256: the blob is corrupt (disk, copy, or
 * tampering). Names the blob and, when known, the artifact version and file.
 */
export class IntegrityError extends FinestoreError {
  override name = 'IntegrityError'
  constructor(
    readonly blob: string,
    message: string,
    readonly artifact?: string,
  ) {
    super('INTEGRITY', message, false)
  }
}

/**
 * Another writer moved the artifact (or tag) first. Nothing was changed by
 * the losing call; begin a new transaction on the new HEAD and retry.
 */
export class ConflictError extends FinestoreError {
  override name = 'ConflictError'
  constructor(
    readonly artifact: string,
    message: string,
    options?: ErrorOptions,
  ) {
    super('CONFLICT', message, true, options)
  }
}

export function isFinestoreError(err: unknown, code?: FinestoreErrorCode): err is FinestoreError {
  return err instanceof FinestoreError && (code === undefined || err.code === code)
}
