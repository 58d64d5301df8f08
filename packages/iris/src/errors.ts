/** @module The one error class of @marin/iris, with codes from a closed set. */

export const IRIS_ERROR_CODES = [
  'BAD_RESOURCES',
  'BAD_REQUEST',
  'BAD_MOUNT',
  'BAD_DURATION',
  'JOB_NOT_FOUND',
  'WORKER_NOT_FOUND',
  'IMAGE_UNSUPPORTED',
  'MOUNT_FAILED',
  'STATE_CORRUPT',
  'CONTROLLER_UNAVAILABLE',
  'TIMEOUT',
  'UNAUTHENTICATED',
  'PERMISSION_DENIED',
] as const

export type IrisErrorCode = (typeof IRIS_ERROR_CODES)[number]

/**
 * Every failure iris reports. `code` is stable and safe to branch on;
 * the message says what failed, on what, and what to do.
 */
export class IrisError extends Error {
  override name = 'IrisError'
  constructor(
    readonly code: IrisErrorCode,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options)
  }
}

export function isIrisError(err: unknown, code?: IrisErrorCode): err is IrisError {
  return err instanceof IrisError && (code === undefined || err.code === code)
}
