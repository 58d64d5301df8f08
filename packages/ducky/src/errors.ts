/**
 * @module The one error class of @marin/ducky: `RpcError`, whose codes are the gRPC status names.
 *
 * A call that fails on the wire, a handler that refuses a request and a bad option given to
 * `serve`/`connect` all surface as an `RpcError`, so callers branch on one closed set of codes.
 */
import type { Metadata } from '@grpc/grpc-js'

/** gRPC status names; the index of each is its numeric code on the wire. */
export const RPC_CODES = [
  'OK',
  'CANCELLED',
  'UNKNOWN',
  'INVALID_ARGUMENT',
  'DEADLINE_EXCEEDED',
  'NOT_FOUND',
  'ALREADY_EXISTS',
  'PERMISSION_DENIED',
  'RESOURCE_EXHAUSTED',
  'FAILED_PRECONDITION',
  'ABORTED',
  'OUT_OF_RANGE',
  'UNIMPLEMENTED',
  'INTERNAL',
  'UNAVAILABLE',
  'DATA_LOSS',
  'UNAUTHENTICATED',
] as const

export type RpcCode = (typeof RPC_CODES)[number]

/** The numeric gRPC status of a code name, e.g. `grpcStatus('UNAVAILABLE') === 14`. */
export function grpcStatus(code: RpcCode): number {
  return RPC_CODES.indexOf(code)
}

/** The code name of a numeric gRPC status; numbers outside the table read as UNKNOWN. */
export function rpcCodeOf(status: number): RpcCode {
  return RPC_CODES[status] ?? 'UNKNOWN'
}

export type RpcErrorOptions = ErrorOptions & {
  /** The full gRPC method path, e.g. `/marin.iris.Controller/submit`. @default '' (not tied to a call) */
  method?: string
  /** Trailing metadata the server sent with the status, if any. */
  metadata?: Metadata
}

/**
 * A failed call or a refused request. `code` is the gRPC status name (stable, safe to branch on),
 * `grpcCode` its number, `details` the text the server sent, `method` the method path.
 * Server handlers throw it to answer with that status; any other thrown error becomes INTERNAL.
 * @example
 * throw new RpcError('NOT_FOUND', `job ${id} does not exist; list jobs with \`iris jobs\``)
 */
export class RpcError extends Error {
  override name = 'RpcError'
  readonly method: string
  readonly metadata: Metadata | undefined

  constructor(
    readonly code: RpcCode,
    readonly details: string,
    options: RpcErrorOptions = {},
  ) {
    super(options.method ? `${options.method}: ${code}: ${details}` : `${code}: ${details}`, options)
    this.method = options.method ?? ''
    this.metadata = options.metadata
  }

  /** The numeric gRPC status code. */
  get grpcCode(): number {
    return grpcStatus(this.code)
  }
}

export function isRpcError(err: unknown, code?: RpcCode): err is RpcError {
  return err instanceof RpcError && (code === undefined || err.code === code)
}

/** Turns a grpc-js status error (`{code, details, metadata}`) into an RpcError for `method`. */
export function fromServiceError(err: unknown, method: string): RpcError {
  if (err instanceof RpcError) return err
  const e = err as { code?: unknown; details?: unknown; metadata?: Metadata; message?: unknown }
  const code = typeof e?.code === 'number' ? rpcCodeOf(e.code) : 'UNKNOWN'
  const details = typeof e?.details === 'string' ? e.details : String(e?.message ?? err)
  return new RpcError(code, details, { method, metadata: e?.metadata, cause: err })
}
