/** @module The one error class of @marin/marin, with codes from a closed set. */

export const MARIN_ERROR_CODES = [
  'BAD_STEP',
  'BAD_CONFIG',
  'BAD_USAGE',
  'BAD_TEMPLATE',
  'DUPLICATE_STEP',
  'CYCLE',
  'SCRIPT_FAILED',
  'SCRIPT_INVALID',
  'STEP_NOT_FOUND',
  'STEP_FAILED',
  'VERSION_MISMATCH',
  'EXPERIMENT_NOT_FOUND',
  'REPORT_SOURCE_INVALID',
  'PUBLISH_FAILED',
] as const

export type MarinErrorCode = (typeof MARIN_ERROR_CODES)[number]

/** Every failure marin reports. `code` is stable; the message says what failed, on what, and what to do. */
export class MarinError extends Error {
  override name = 'MarinError'
  constructor(
    readonly code: MarinErrorCode,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options)
  }
}

export function isMarinError(err: unknown, code?: MarinErrorCode): err is MarinError {
  return err instanceof MarinError && (code === undefined || err.code === code)
}
