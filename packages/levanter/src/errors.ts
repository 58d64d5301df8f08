/** @module The one error class of levanter, with codes from a closed list. */

export const LEVANTER_ERROR_CODES = [
  'BAD_CONFIG',
  'BAD_SHAPE',
  'BACKEND_UNAVAILABLE',
  'BAD_CHECKPOINT',
  'CHECKPOINT_NOT_FOUND',
  'CHECKPOINT_DAMAGED',
  'BAD_SAFETENSORS',
  'BAD_DATA',
  'REPLICA_FAILED',
  'NON_FINITE_LOSS',
  'OUT_OF_MEMORY',
] as const
export type LevanterErrorCode = (typeof LEVANTER_ERROR_CODES)[number]

/** Every error levanter throws on purpose; `code` is stable, the message says what to do. */
export class LevanterError extends Error {
  override name = 'LevanterError'
  constructor(
    readonly code: LevanterErrorCode,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options)
  }
}

/** True for a {@link LevanterError}, optionally with the given code. */
export function isLevanterError(e: unknown, code?: LevanterErrorCode): e is LevanterError {
  return e instanceof LevanterError && (code === undefined || e.code === code)
}
