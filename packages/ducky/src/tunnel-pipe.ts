/**
 * @module The byte path of one tunnel connection, event-driven at both ends: a chunk a socket
 * reads goes to `call.write` from the socket's 'data' event, and a message the gRPC call
 * delivers goes to `socket.write` from the call's 'data' event, one callback per hop. A side
 * whose writes are over its high-water mark pauses the side that feeds it until 'drain'.
 *
 * Tunnel chunks bypass the async iterables of ducky's generic streaming API: those cost a few
 * promises and generator steps per message, which for 64 KiB socket reads is a tenth of the time
 * of the whole copy. Half-close travels as in the generic protocol: the client's end of input is
 * the gRPC half-close, the target's end of input is an empty message.
 */
import type { Socket } from 'node:net'
import type { Readable, Writable } from 'node:stream'
import type { ClientDuplexStream, ServerDuplexStream } from '@grpc/grpc-js'
import { RpcError } from './errors.js'
import type { CallContext } from './handlers.js'
import type { Boxed } from './wire.js'
import { RAW_CALL } from './server-calls.js'

/** The server's half of a tunnel call; messages are boxed, as the `bytes` codec serializes them. */
export type TunnelServerCall = ServerDuplexStream<Boxed, Boxed>
/** The client's half of a tunnel call, with identity serializers: messages are the Buffers themselves. */
export type TunnelClientCall = ClientDuplexStream<Buffer, Buffer>

/** An empty message: the target ended its output. */
const EOF = Buffer.alloc(0)

/** Sends each chunk `from` emits through `write`; pauses `from` while `to` wants a 'drain'. */
function forward<T>(from: Readable, write: (chunk: T) => boolean, to: Writable): void {
  let waiting = false
  const resume = () => {
    waiting = false
    from.resume()
  }
  from.on('data', (chunk: T) => {
    if (!write(chunk) && !waiting) {
      waiting = true
      from.pause()
      to.once('drain', resume)
    }
  })
}

/**
 * The grpc-js call under a server call's context, through the server's internal {@link RAW_CALL}
 * accessor; a context without it (not made by ducky's server) fails loudly (INTERNAL).
 */
export function serverCallOf(ctx: CallContext): TunnelServerCall {
  const call = (ctx as unknown as { [RAW_CALL]?: () => Partial<TunnelServerCall> })[RAW_CALL]?.()
  if (typeof call?.write !== 'function' || typeof call.on !== 'function' || typeof call.pause !== 'function') {
    throw new RpcError(
      'INTERNAL',
      'the tunnel cannot reach the grpc-js call of its context; the server and the tunnel service are out of step',
      { method: ctx.method },
    )
  }
  return call as TunnelServerCall
}

/**
 * Carries one tunnel connection on the server: `call` ↔ `socket` (connected to the target).
 * Resolves once both directions ended and the socket closed; rejects with UNAVAILABLE when the
 * target connection fails, or CANCELLED when `signal` aborts (the client cancelled).
 */
export function serveConnection(
  call: TunnelServerCall,
  socket: Socket,
  signal: AbortSignal,
  to: string,
  method: string,
): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let clientEnded = false
    let targetEnded = false
    let failure: RpcError | undefined
    // Target → client; the target's end of input becomes the empty message.
    forward<Buffer>(socket, (d) => call.write({ value: d }), call)
    socket.on('end', () => {
      targetEnded = true
      call.write({ value: EOF })
    })
    // Client → target; the client's half-close becomes a TCP half-close.
    forward<Boxed>(call, (m) => (m.value as Buffer).length === 0 || socket.write(m.value as Buffer), socket)
    call.on('end', () => {
      clientEnded = true
      socket.end()
    })
    call.on('error', (err: Error) => {
      failure ??= new RpcError('CANCELLED', `the tunnel call failed: ${err.message}`, { method, cause: err })
      socket.destroy()
    })
    socket.on('error', (err: NodeJS.ErrnoException) => {
      failure ??= new RpcError(
        'UNAVAILABLE',
        `the connection to tunnel target ${to} failed: ${err.code ?? err.message}; check the target`,
        { method, cause: err },
      )
    })
    const onAbort = () => {
      failure ??= new RpcError('CANCELLED', 'the client cancelled the tunnel call', { method })
      socket.destroy()
    }
    signal.addEventListener('abort', onAbort, { once: true })
    // With allowHalfOpen the socket closes once both its directions ended, or on a failure.
    socket.on('close', () => {
      signal.removeEventListener('abort', onAbort)
      if (failure) reject(failure)
      else if (clientEnded && targetEnded) resolve()
      else
        reject(
          new RpcError('UNAVAILABLE', `the connection to tunnel target ${to} closed before both directions ended`, {
            method,
          }),
        )
    })
    if (signal.aborted) onAbort()
  })
}

/**
 * Carries one local connection over `call` on the client. A failed call destroys the socket and
 * is reported to `onFailure`; an abrupt local close (reset, error, destroy) cancels the call, which
 * closes the target connection. After a clean close (both directions ended) the call finishes by
 * itself, still delivering what it carries; cancelling it then could drop the last bytes on their
 * way to the target.
 */
export function carryConnection(sock: Socket, call: TunnelClientCall, onFailure: (err: unknown) => void): void {
  let cancelled = false
  let failed = false
  const cancel = () => {
    cancelled = true
    call.cancel()
  }
  // Local → target; the local end of input is the gRPC half-close.
  forward<Buffer>(sock, (d) => call.write(d), call)
  sock.on('end', () => call.end())
  sock.on('error', cancel)
  sock.on('close', (hadError) => {
    if (hadError || !sock.readableEnded) cancel()
  })
  // Target → local; the empty message is the target's end of input.
  forward<Buffer>(
    call,
    (d) => {
      if (d.length > 0) return sock.write(d)
      sock.end()
      return true
    },
    sock,
  )
  call.on('end', () => {
    if (!failed) sock.end()
  })
  call.on('error', (err) => {
    failed = true
    if (!cancelled) onFailure(err)
    sock.destroy()
  })
}
