/** @module The one error class of @marin/fray, with codes from a closed set, and the actor-death subclass. */

export const FRAY_ERROR_CODES = [
  'ACTOR_DIED',
  'ACTOR_START_FAILED',
  'ACTOR_NOT_FOUND',
  'ACTOR_METHOD_FAILED',
  'ACTOR_NO_SUCH_METHOD',
  'CALL_TIMEOUT',
  'NOT_SERIALIZABLE',
  'CLIENT_SHUT_DOWN',
  'INVALID_RESOURCES',
  'INVALID_JOB_REQUEST',
  'JOB_FAILED',
  'JOB_TIMEOUT',
  'INVALID_MESH',
  'NOT_IN_MESH',
  'COLLECTIVE_MISMATCH',
  'COLLECTIVE_PEER_LOST',
  'PARAMETER_SERVER',
  'BACKEND_UNAVAILABLE',
] as const

export type FrayErrorCode = (typeof FRAY_ERROR_CODES)[number]

/**
 * Every failure fray reports. `code` is stable and safe to branch on;
 * the message says what failed, on what, and what to do.
 */
export class FrayError extends Error {
  override name = 'FrayError'
  constructor(
    readonly code: FrayErrorCode,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options)
  }
}

/**
 * The process hosting an actor exited while calls were pending (or a call was
 * made after it exited and no restart was left). `exitCode`/`signal` are the
 * process's own, so `signal === 'SIGKILL'` tells an OOM kill from a crash.
 */
export class ActorDiedError extends FrayError {
  override name = 'ActorDiedError'
  constructor(
    readonly actor: string,
    readonly exitCode: number | null,
    readonly signal: string | null,
    message?: string,
  ) {
    super(
      'ACTOR_DIED',
      message ??
        `actor ${actor} died (${signal ? `signal ${signal}` : `exit code ${exitCode}`}); ` +
          'its pending calls were rejected; pass maxRestarts to bring it back automatically',
    )
  }
}

export function isFrayError(err: unknown, code?: FrayErrorCode): err is FrayError {
  return err instanceof FrayError && (code === undefined || err.code === code)
}
