/** @module The one error class of @marin/rigging, with codes from a closed set. */

export const RIGGING_ERROR_CODES = [
  'CONFIG_NOT_FOUND',
  'CONFIG_PARSE',
  'CONFIG_INVALID',
  'SECRET_NOT_FOUND',
  'SECRET_UNREADABLE',
  'SECRET_INVALID_SPEC',
  'SECRET_WRITE_FAILED',
  'TELEMETRY_INVALID',
  'TELEMETRY_IO',
  'STORAGE_UNKNOWN_SCHEME',
  'STORAGE_ADAPTER_MISSING',
  'STORAGE_NOT_FOUND',
  'STORAGE_PERMISSION',
  'STORAGE_CONDITION_FAILED',
  'STORAGE_INVALID_PATH',
  'STORAGE_IO',
  'LEASE_HELD',
  'LEASE_NOT_OWNER',
  'LEASE_LOST',
  'LEASE_INVALID',
  'BYTE_SIZE_INVALID',
  'PREFIX_NOT_LOCAL',
] as const

export type RiggingErrorCode = (typeof RIGGING_ERROR_CODES)[number]

/**
 * Every failure rigging reports. `code` is stable and safe to branch on;
 * the message says what failed, on what, and what to do.
 */
export class RiggingError extends Error {
  override name = 'RiggingError'
  constructor(
    readonly code: RiggingErrorCode,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options)
  }
}

export function isRiggingError(err: unknown, code?: RiggingErrorCode): err is RiggingError {
  return err instanceof RiggingError && (code === undefined || err.code === code)
}
