/**
 * @module Messages between a driver and an actor's worker process. They travel over the
 * process's IPC channel with Node's "advanced" serialization (the V8 structured-clone
 * format): typed arrays go as raw bytes, never through JSON. Small tuples keep the
 * per-call overhead close to a bare message round trip.
 */
import type { ActorSpec } from '../actor-runtime.js'
import { FrayError, isFrayError } from '../errors.js'

export const MSG = { init: 0, call: 1, control: 2, stop: 3, ready: 10, initFailed: 11, ok: 12, err: 13 } as const

export type ToWorker =
  | [typeof MSG.init, ActorSpec]
  | [typeof MSG.call, number, string, unknown[]]
  | [typeof MSG.control, number, string, unknown]
  | [typeof MSG.stop]

export type FromWorker =
  | [typeof MSG.ready]
  | [typeof MSG.initFailed, ErrorPayload]
  | [typeof MSG.ok, number, unknown]
  | [typeof MSG.err, number, ErrorPayload]

export type ErrorPayload = { name: string; message: string; stack?: string; code?: string }

export function errorPayload(err: unknown): ErrorPayload {
  if (err instanceof Error) {
    const p: ErrorPayload = { name: err.name, message: err.message }
    if (err.stack) p.stack = err.stack
    if (isFrayError(err)) p.code = err.code
    return p
  }
  return { name: 'Error', message: String(err) }
}

/**
 * Rebuilds an actor's error on the driver. Fray's own errors keep their code; an error the
 * actor's method threw becomes `ACTOR_METHOD_FAILED` with the original name, message and
 * remote stack under `cause`.
 */
export function errorFromPayload(actor: string, method: string, p: ErrorPayload): FrayError {
  const remote = Object.assign(new Error(p.message), { name: p.name, stack: p.stack })
  if (p.code && p.name === 'FrayError') return new FrayError(p.code as FrayError['code'], p.message, { cause: remote })
  return new FrayError('ACTOR_METHOD_FAILED', `actor ${actor}.${method} threw ${p.name}: ${p.message}`, {
    cause: remote,
  })
}
