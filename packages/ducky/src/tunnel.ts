/**
 * @module TCP tunnels over a gRPC bidirectional stream: a dashboard or a worker's port reached
 * through the one port a ducky server exposes.
 *
 * The client listens on a local port; each accepted connection opens one `ducky.Tunnel/open`
 * call whose metadata names the target. The server checks the target against its allow-list
 * (anything else: PERMISSION_DENIED), connects to it and copies bytes both ways. Half-close
 * travels too: the client's end of input is the gRPC half-close, the target's end of input is
 * an empty message, and the call ends once both directions are done, so protocols that send a
 * request, shut down their write side and then read the answer work through the tunnel.
 * Messages use the `bytes` codec: each is a chunk of the TCP stream, sent without a header or copy.
 * The bytes travel between the sockets and the grpc-js call directly (tunnel-pipe.ts), not through
 * the async iterables of the streaming API; the service definition and the protocol are the same,
 * so a typed client can still call `open` (the tests do).
 */
import { createConnection, createServer, type AddressInfo, type Socket } from 'node:net'
import type { Metadata } from '@grpc/grpc-js'
import { z } from 'zod'
import type { TokenSource } from './auth.js'
import { connect, openChannel } from './client.js'
import { fromServiceError, RpcError } from './errors.js'
import { grpcJs } from './grpc-js.js'
import { bind, type ServiceBinding } from './handlers.js'
import { defaultLogger, type DuckyLogger } from './log.js'
import { bidi, defineService, methodPath, unary } from './service.js'
import type { ClientTlsOptions } from './transport.js'
import { carryConnection, serveConnection, serverCallOf, type TunnelClientCall } from './tunnel-pipe.js'

/** One chunk of tunnel traffic; an empty chunk from the server means the target ended its output. */
const Chunk = z.custom<Uint8Array>((v) => v instanceof Uint8Array, 'expected Uint8Array')

/** The tunnel service; add it to a server with `tunnelService({ allow })`. */
export const TunnelService = defineService({
  name: 'ducky.Tunnel',
  methods: {
    /** Whether `to` may be reached; refuses with PERMISSION_DENIED otherwise. */
    check: unary(z.strictObject({ to: z.string() }), z.strictObject({ to: z.string() }), { idempotent: true }),
    /** One TCP connection to the target named by the `ducky-tunnel-to` metadata. */
    open: bidi(Chunk, Chunk, { codec: 'bytes' }),
  },
})

const TARGET_HEADER = 'ducky-tunnel-to'
const OPEN_PATH = methodPath(TunnelService, 'open')
const same = (b: Buffer) => b

/** `host:port` → its parts; IPv6 hosts in brackets (`[::1]:8080`). */
export function parseHostPort(text: string, field: string): { host: string; port: number; key: string } {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]\s]+)):(\d{1,5})$/.exec(text.trim())
  const port = m ? Number(m[3]) : NaN
  if (!m || port < 1 || port > 65535) {
    throw new RpcError(
      'INVALID_ARGUMENT',
      `${field}: ${JSON.stringify(text)} is not host:port; write it like 127.0.0.1:8080 or [::1]:8080`,
    )
  }
  const host = (m[1] ?? m[2]!).toLowerCase()
  return { host, port, key: `${host.includes(':') ? `[${host}]` : host}:${port}` }
}

export type TunnelServiceOptions = {
  /** Targets that may be reached, as `host:port`; every other target is refused. */
  allow: readonly string[]
  /** Give up connecting to a target after this long, in ms. @default 10000 */
  connectTimeoutMs?: number
  /** @default logger('ducky') from rigging */
  logger?: DuckyLogger
}

function dial(host: string, port: number, timeoutMs: number, signal: AbortSignal, to: string): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = createConnection({ host, port, allowHalfOpen: true, noDelay: true, signal })
    const timer = setTimeout(() => socket.destroy(new Error(`no connection within ${timeoutMs} ms`)), timeoutMs)
    socket.once('connect', () => {
      clearTimeout(timer)
      socket.off('error', fail)
      resolve(socket)
    })
    const fail = (err: NodeJS.ErrnoException) => {
      clearTimeout(timer)
      reject(
        new RpcError(
          'UNAVAILABLE',
          `cannot connect to tunnel target ${to}: ${err.code ?? err.message}; check that something listens there`,
          { cause: err },
        ),
      )
    }
    socket.once('error', fail)
  })
}

/**
 * The server side of tunnels, to add to a server: `serve(def, impl, { services: [tunnelService({ allow })] })`.
 * @example
 * await serve(Controller, impl, { services: [tunnelService({ allow: ['127.0.0.1:8265'] })] })
 */
export function tunnelService(opts: TunnelServiceOptions): ServiceBinding {
  const allowed = new Set(opts.allow.map((a, i) => parseHostPort(a, `allow[${i}]`).key))
  const log = opts.logger ?? defaultLogger()
  const timeoutMs = opts.connectTimeoutMs ?? 10_000
  const permit = (to: string, method: string) => {
    const target = parseHostPort(to, 'tunnel target')
    if (!allowed.has(target.key)) {
      log.warn({ to: target.key, method }, 'refused tunnel to a target outside the allow-list')
      throw new RpcError(
        'PERMISSION_DENIED',
        `tunnel target ${target.key} is not allowed; the server allows ${[...allowed].join(', ') || 'no target'}`,
        { method },
      )
    }
    return target
  }
  return bind(TunnelService, {
    check: ({ to }, ctx) => ({ to: permit(to, ctx.method).key }),
    // The byte path runs on the grpc-js call itself (see tunnel-pipe.ts): nothing is yielded
    // here, and the call ends with OK once both directions of the connection ended.
    // biome-ignore lint/correctness/useYield: a server stream whose bytes go on the call itself, not through yield
    open: async function* (_frames, ctx) {
      const call = serverCallOf(ctx)
      const header = ctx.metadata.get(TARGET_HEADER)[0]
      if (typeof header !== 'string')
        throw new RpcError('INVALID_ARGUMENT', `missing ${TARGET_HEADER} metadata; open tunnels with openTunnel()`, {
          method: ctx.method,
        })
      const target = permit(header, ctx.method)
      const socket = await dial(target.host, target.port, timeoutMs, ctx.signal, target.key)
      log.debug({ to: target.key, peer: ctx.peer }, 'tunnel connection opened')
      try {
        await serveConnection(call, socket, ctx.signal, target.key, ctx.method)
      } finally {
        socket.destroy()
        log.debug({ to: target.key }, 'tunnel connection closed')
      }
    },
  })
}

export type OpenTunnelOptions = {
  /** The ducky server that carries the tunnel, `host:port`. */
  via: string
  /** The target as the server sees it, `host:port`; must be in the server's allow-list. */
  to: string
  /** Local port to listen on; 0 picks a free one. */
  listen: number
  /** Local interface to listen on. @default '127.0.0.1' */
  host?: string
  token?: TokenSource
  tls?: ClientTlsOptions | true
  /** @default logger('ducky') from rigging */
  logger?: DuckyLogger
}

/** An open tunnel: connect to `host:port` locally to reach the target. */
export type Tunnel = {
  readonly host: string
  readonly port: number
  /** `host:port` of the local end. */
  readonly address: string
  /** Stops listening, closes open connections and the channel. */
  close(): Promise<void>
}

/**
 * Listens on a local port and forwards each connection to `to` through the server `via`.
 * Rejects with PERMISSION_DENIED (target not allowed), UNAUTHENTICATED or UNAVAILABLE before
 * listening, so a mistake shows at once rather than on the first connection.
 * @example
 * const t = await openTunnel({ via: 'head:7070', to: '127.0.0.1:8265', listen: 8265 })
 * // http://127.0.0.1:8265 now reaches the dashboard on the head node
 * await t.close()
 */
export async function openTunnel(opts: OpenTunnelOptions): Promise<Tunnel> {
  const log = opts.logger ?? defaultLogger()
  const to = parseHostPort(opts.to, 'to').key
  const client = connect(TunnelService, opts.via, {
    token: opts.token,
    tls: opts.tls,
    logger: log,
    retry: { maxAttempts: 1 },
  })
  try {
    await client.check({ to }, { deadlineMs: 10_000 })
  } catch (err) {
    client.close()
    throw err
  }
  // Connections are raw grpc-js calls (see tunnel-pipe.ts) on a channel built as `connect` builds one.
  const { grpc, metadata } = openChannel(opts.via, TunnelService, { tls: opts.tls, token: opts.token })
  const closeClients = () => {
    grpc.close()
    client.close()
  }
  const failed = (err: unknown) =>
    log.warn({ err: fromServiceError(err, OPEN_PATH), to, via: opts.via }, 'tunnel connection failed')
  const start = (sock: Socket, md: Metadata) => {
    if (sock.destroyed) return
    const call: TunnelClientCall = grpc.makeBidiStreamRequest(OPEN_PATH, same, same, md, { deadline: Infinity })
    carryConnection(sock, call, failed)
  }
  const sockets = new Set<Socket>()
  const server = createServer({ allowHalfOpen: true, noDelay: true }, (sock) => {
    sockets.add(sock)
    sock.on('close', () => sockets.delete(sock))
    const md = metadata({ [TARGET_HEADER]: to })
    if (md instanceof grpcJs().Metadata) return start(sock, md)
    // Until the call starts nobody reads the socket, so its bytes wait in the kernel.
    sock.on('error', () => {})
    md.then(
      (m) => start(sock, m),
      (err: unknown) => {
        log.warn({ err, to, via: opts.via }, 'tunnel connection failed: no bearer token')
        sock.destroy()
      },
    )
  })
  const host = opts.host ?? '127.0.0.1'
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(opts.listen, host, () => resolve())
    })
  } catch (err) {
    closeClients()
    throw new RpcError(
      'UNAVAILABLE',
      `cannot listen on ${host}:${opts.listen}: ${(err as NodeJS.ErrnoException).code}; pick a free local port`,
      { cause: err },
    )
  }
  const port = (server.address() as AddressInfo).port
  log.info({ listen: `${host}:${port}`, to, via: opts.via }, 'tunnel open')
  return {
    host,
    port,
    address: `${host.includes(':') ? `[${host}]` : host}:${port}`,
    async close() {
      const closed = new Promise((resolve) => server.close(resolve))
      for (const s of sockets) s.destroy()
      await closed
      closeClients()
    },
  }
}
