/**
 * @module The server side of one call of each kind: request validation, the handler, response
 * validation, backpressure and the mapping of failures to gRPC statuses. (The bearer token and
 * the size limits are checked before, by the gate: call-gate.ts.)
 */
import type {
  handleBidiStreamingCall,
  handleServerStreamingCall,
  handleUnaryCall,
  Metadata,
  sendUnaryData,
  ServerDuplexStream,
  ServerUnaryCall,
  ServerWritableStream,
  StatusObject,
} from '@grpc/grpc-js'
import { grpcStatus, RpcError } from './errors.js'
import type { BidiHandler, CallContext, ServerStreamHandler, UnaryHandler } from './handlers.js'
import type { DuckyLogger } from './log.js'
import type { MethodDef } from './service.js'
import { parseRequest, parseResponse } from './validation.js'
import type { Boxed } from './wire.js'

/** What every call of one server shares. */
export type CallEnv = {
  log: DuckyLogger
}

type AnyCall = {
  metadata: Metadata
  getPeer(): string
  getDeadline(): Date | number
  on(ev: 'cancelled', fn: () => void): unknown
  off(ev: 'cancelled', fn: () => void): unknown
  cancelled: boolean
}

/**
 * The `CallContext` of one server call. A class rather than closures and an object literal with
 * getters: a call then costs one small allocation, where closures and accessor literals cost
 * several (and, under tsx's `keepNames`, a `defineProperty` per closure). The AbortController and
 * the 'cancelled' listener are made only when a handler reads `signal`: most unary handlers
 * never do, and a call then costs neither.
 */
/**
 * @internal How ducky's own byte-stream services (tunnels) reach the grpc-js call behind a
 * handler's context, to move bytes without the async-iterable layers.
 */
export const RAW_CALL: unique symbol = Symbol('ducky.rawCall')

class ServerCallContext implements CallContext {
  readonly metadata: Metadata
  private controller: AbortController | undefined = undefined
  private finished = false
  private onCancel: (() => void) | undefined = undefined

  constructor(
    private readonly call: AnyCall,
    readonly method: string,
  ) {
    this.metadata = call.metadata
  }

  /** @internal see {@link RAW_CALL} */
  [RAW_CALL](): AnyCall {
    return this.call
  }

  get signal(): AbortSignal {
    if (this.controller === undefined) {
      this.controller = new AbortController()
      if (this.call.cancelled && !this.finished) this.cancelled()
      // grpc-js also reports 'cancelled' when a finished call's stream closes: `done` detaches
      // the listener once ducky has sent the status, so only a real cancellation aborts.
      else if (!this.finished) this.call.on('cancelled', (this.onCancel = () => this.cancelled()))
    }
    return this.controller.signal
  }

  get peer(): string {
    return this.call.getPeer()
  }

  get deadline(): Date | undefined {
    const d = this.call.getDeadline()
    return d instanceof Date ? d : Number.isFinite(d) ? new Date(d) : undefined
  }

  private cancelled(): void {
    this.controller?.abort(
      new RpcError('CANCELLED', 'the client cancelled the call, its deadline passed or the server shut down', {
        method: this.method,
      }),
    )
  }

  /** Aborts the handler's signal with `reason`. */
  abortWith(reason: unknown): void {
    void this.signal
    this.controller!.abort(reason)
  }

  /** The status is sent: a later 'cancelled' is the stream closing, not a cancellation. */
  done(): void {
    this.finished = true
    if (this.onCancel !== undefined) this.call.off('cancelled', this.onCancel)
  }
}

/** The status sent for a failure; anything but an RpcError is a server bug: logged, sent as INTERNAL. */
export function toStatus(env: CallEnv, err: unknown, method: string): Partial<StatusObject> {
  if (err instanceof RpcError) {
    if (err.code === 'INTERNAL' || err.code === 'UNKNOWN' || err.code === 'DATA_LOSS')
      env.log.error({ err, method }, 'call failed')
    return { code: err.grpcCode, details: err.details, ...(err.metadata ? { metadata: err.metadata } : {}) }
  }
  env.log.error({ err, method }, 'handler failed')
  return { code: grpcStatus('INTERNAL'), details: `internal error in ${method}; the server log has the cause` }
}

/** Resolves once `call` can take more data, or the call is cancelled. */
function drained(
  call: ServerWritableStream<unknown, unknown> | ServerDuplexStream<unknown, unknown>,
  signal: AbortSignal,
): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      call.off('drain', done)
      signal.removeEventListener('abort', done)
      resolve()
    }
    call.on('drain', done)
    signal.addEventListener('abort', done)
  })
}

async function writeAll(
  call: ServerWritableStream<unknown, unknown> | ServerDuplexStream<unknown, unknown>,
  items: AsyncIterable<unknown> | Iterable<unknown>,
  def: MethodDef,
  ctx: ServerCallContext,
): Promise<void> {
  const { signal, method } = ctx
  for await (const item of items) {
    if (signal.aborted) return
    if (!call.write({ value: parseResponse(def.response, item, method) })) await drained(call, signal)
    if (signal.aborted) return
  }
  ctx.done()
  call.end()
}

function failUnary(env: CallEnv, ctx: ServerCallContext, callback: sendUnaryData<unknown>, err: unknown): void {
  ctx.done()
  callback(toStatus(env, err, ctx.method))
}

function replyUnary(
  env: CallEnv,
  def: MethodDef,
  ctx: ServerCallContext,
  callback: sendUnaryData<unknown>,
  res: unknown,
): void {
  let value: unknown
  try {
    value = parseResponse(def.response, res, ctx.method)
  } catch (err) {
    return failUnary(env, ctx, callback, err)
  }
  ctx.done()
  callback(null, { value })
}

/** Validates the request, runs the handler, answers; throws what fails before the handler returns. */
function handleUnary(
  env: CallEnv,
  def: MethodDef,
  handler: UnaryHandler<unknown, unknown>,
  call: ServerUnaryCall<unknown, unknown>,
  ctx: ServerCallContext,
  callback: sendUnaryData<unknown>,
): void {
  const res = handler(parseRequest(def.request, (call.request as Boxed).value, ctx.method), ctx)
  if (typeof (res as PromiseLike<unknown> | undefined)?.then === 'function') {
    ;(res as PromiseLike<unknown>).then(
      (v) => replyUnary(env, def, ctx, callback, v),
      (err) => failUnary(env, ctx, callback, err),
    )
  } else replyUnary(env, def, ctx, callback, res)
}

export function unaryCall(
  env: CallEnv,
  def: MethodDef,
  method: string,
  handler: UnaryHandler<unknown, unknown>,
): handleUnaryCall<unknown, unknown> {
  // Synchronous as far as the handler allows: no promise and no closure per call unless the
  // handler needs one.
  return (call, callback) => {
    const ctx = new ServerCallContext(call, method)
    try {
      handleUnary(env, def, handler, call, ctx, callback)
    } catch (err) {
      failUnary(env, ctx, callback, err)
    }
  }
}

export function serverStreamCall(
  env: CallEnv,
  def: MethodDef,
  method: string,
  handler: ServerStreamHandler<unknown, unknown>,
): handleServerStreamingCall<unknown, unknown> {
  return (call) => {
    const ctx = new ServerCallContext(call, method)
    const run = async () => {
      const req = parseRequest(def.request, (call.request as Boxed).value, method)
      await writeAll(call, handler(req, ctx), def, ctx)
    }
    run().catch((err) => {
      ctx.done()
      if (!call.cancelled) call.emit('error', toStatus(env, err, method))
    })
  }
}

export function bidiCall(
  env: CallEnv,
  def: MethodDef,
  method: string,
  handler: BidiHandler<unknown, unknown>,
): handleBidiStreamingCall<unknown, unknown> {
  return (call) => {
    const ctx = new ServerCallContext(call, method)
    // A bad request fails the call with INVALID_ARGUMENT even if the handler swallows the error.
    let badRequest: RpcError | undefined
    async function* requests(): AsyncGenerator<unknown> {
      // Not `for await (… of call)`: that destroys the duplex when the requests end, and with it
      // the response side the handler still writes to.
      for await (const raw of call.iterator({ destroyOnReturn: false })) {
        try {
          yield parseRequest(def.request, (raw as Boxed).value, method)
        } catch (err) {
          badRequest = err as RpcError
          ctx.abortWith(badRequest)
          throw err
        }
      }
    }
    const run = async () => {
      await writeAll(call, handler(requests(), ctx), def, ctx)
      if (badRequest) throw badRequest
    }
    run().catch((err) => {
      ctx.done()
      if (!call.cancelled) call.emit('error', toStatus(env, badRequest ?? err, method))
    })
  }
}
