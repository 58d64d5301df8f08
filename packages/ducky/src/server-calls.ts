/**
 * @module The server side of one call of each kind: auth, request validation, the handler,
 * response validation, backpressure and the mapping of failures to gRPC statuses.
 */
import type { handleBidiStreamingCall, handleServerStreamingCall, handleUnaryCall, Metadata, ServerDuplexStream, ServerWritableStream, StatusObject } from '@grpc/grpc-js'
import { checkBearer, digest, type ResolvedToken } from './auth.js'
import { grpcStatus, RpcError } from './errors.js'
import type { BidiHandler, CallContext, ServerStreamHandler, UnaryHandler } from './handlers.js'
import type { DuckyLogger } from './log.js'
import type { MethodDef } from './service.js'
import { parseRequest, parseResponse } from './validation.js'
import type { Boxed } from './wire.js'

/** What every call of one server shares. */
export type CallEnv = {
  log: DuckyLogger
  /** The expected bearer token, or undefined when the server is open. */
  token: ResolvedToken | undefined
  /** Digest of a literal token, computed once. */
  tokenDigest: Buffer | undefined
}

type AnyCall = {
  metadata: Metadata
  getPeer(): string
  getDeadline(): Date | number
  on(ev: 'cancelled', fn: () => void): unknown
  off(ev: 'cancelled', fn: () => void): unknown
  cancelled: boolean
}

function context(call: AnyCall, method: string): { ctx: CallContext; abort: (reason: unknown) => void; done: () => void } {
  // The AbortController and the 'cancelled' listener are made only when a handler reads
  // `ctx.signal`: most unary handlers never do, and a call then costs neither.
  let abort: AbortController | undefined
  let finished = false
  const onCancel = () => abort?.abort(new RpcError('CANCELLED', 'the client cancelled the call, its deadline passed or the server shut down', { method }))
  const signal = () => {
    if (abort === undefined) {
      abort = new AbortController()
      if (call.cancelled && !finished) onCancel()
      // grpc-js also reports 'cancelled' when a finished call's stream closes: `done` detaches
      // the listener once ducky has sent the status, so only a real cancellation aborts.
      else if (!finished) call.on('cancelled', onCancel)
    }
    return abort.signal
  }
  const ctx: CallContext = {
    method,
    get signal() {
      return signal()
    },
    metadata: call.metadata,
    get peer() {
      return call.getPeer()
    },
    get deadline() {
      const d = call.getDeadline()
      return d instanceof Date ? d : Number.isFinite(d) ? new Date(d) : undefined
    },
  }
  return {
    ctx,
    abort: (reason) => {
      signal()
      abort!.abort(reason)
    },
    done: () => {
      finished = true
      call.off('cancelled', onCancel)
    },
  }
}

/** Refuses the call unless it carries the server's bearer token. Sync when the token is a literal. */
function authorize(env: CallEnv, call: AnyCall, method: string): void | Promise<void> {
  if (env.token === undefined) return
  const refuse = (reason: string) => {
    // The log line names the caller and the reason, never the token that was sent.
    env.log.warn({ method, peer: call.getPeer(), reason }, 'refused call: bad bearer token')
    return new RpcError('UNAUTHENTICATED', reason === 'missing' ? 'missing bearer token; pass the server token to connect()' : `${reason} bearer token; check the token passed to connect()`, { method })
  }
  if (env.tokenDigest !== undefined) {
    const reason = checkBearer(call.metadata, env.tokenDigest)
    if (reason !== undefined) throw refuse(reason)
    return
  }
  const load = (env.token as { load: () => Promise<string> }).load
  return load().then((t) => {
    const reason = checkBearer(call.metadata, digest(t))
    if (reason !== undefined) throw refuse(reason)
  })
}

/** The status sent for a failure; anything but an RpcError is a server bug: logged, sent as INTERNAL. */
function toStatus(env: CallEnv, err: unknown, method: string): Partial<StatusObject> {
  if (err instanceof RpcError) {
    if (err.code === 'INTERNAL' || err.code === 'UNKNOWN' || err.code === 'DATA_LOSS') env.log.error({ err, method }, 'call failed')
    return { code: err.grpcCode, details: err.details, ...(err.metadata ? { metadata: err.metadata } : {}) }
  }
  env.log.error({ err, method }, 'handler failed')
  return { code: grpcStatus('INTERNAL'), details: `internal error in ${method}; the server log has the cause` }
}

/** Resolves once `call` can take more data, or the call is cancelled. */
function drained(call: ServerWritableStream<unknown, unknown> | ServerDuplexStream<unknown, unknown>, signal: AbortSignal): Promise<void> {
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
  method: string,
  signal: AbortSignal,
  done: () => void,
): Promise<void> {
  for await (const item of items) {
    if (signal.aborted) return
    if (!call.write({ value: parseResponse(def.response, item, method) })) await drained(call, signal)
    if (signal.aborted) return
  }
  done()
  call.end()
}

export function unaryCall(env: CallEnv, def: MethodDef, method: string, handler: UnaryHandler<unknown, unknown>): handleUnaryCall<unknown, unknown> {
  return (call, callback) => {
    const { ctx, done } = context(call, method)
    const fail = (err: unknown) => {
      done()
      callback(toStatus(env, err, method))
    }
    const reply = (res: unknown) => {
      try {
        const value = parseResponse(def.response, res, method)
        done()
        callback(null, { value })
      } catch (err) {
        fail(err)
      }
    }
    const handle = () => {
      const res = handler(parseRequest(def.request, (call.request as Boxed).value, method), ctx)
      if (typeof (res as PromiseLike<unknown> | undefined)?.then === 'function') (res as PromiseLike<unknown>).then(reply, fail)
      else reply(res)
    }
    // Synchronous as far as the handler allows: no promise unless auth or the handler needs one.
    try {
      const auth = authorize(env, call, method)
      if (auth) auth.then(() => handle()).catch(fail)
      else handle()
    } catch (err) {
      fail(err)
    }
  }
}

export function serverStreamCall(env: CallEnv, def: MethodDef, method: string, handler: ServerStreamHandler<unknown, unknown>): handleServerStreamingCall<unknown, unknown> {
  return (call) => {
    const { ctx, done } = context(call, method)
    const run = async () => {
      const auth = authorize(env, call, method)
      if (auth) await auth
      const req = parseRequest(def.request, (call.request as Boxed).value, method)
      await writeAll(call, handler(req, ctx), def, method, ctx.signal, done)
    }
    run().catch((err) => {
      done()
      if (!call.cancelled) call.emit('error', toStatus(env, err, method))
    })
  }
}

export function bidiCall(env: CallEnv, def: MethodDef, method: string, handler: BidiHandler<unknown, unknown>): handleBidiStreamingCall<unknown, unknown> {
  return (call) => {
    const { ctx, abort, done } = context(call, method)
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
          abort(badRequest)
          throw err
        }
      }
    }
    const run = async () => {
      const auth = authorize(env, call, method)
      if (auth) await auth
      await writeAll(call, handler(requests(), ctx), def, method, ctx.signal, done)
      if (badRequest) throw badRequest
    }
    run().catch((err) => {
      done()
      if (!call.cancelled) call.emit('error', toStatus(env, badRequest ?? err, method))
    })
  }
}
