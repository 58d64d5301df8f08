/** @module `serve(def, impl, opts)`: a gRPC server for ducky services, with health, auth and drain. */
import type { ServiceDefinition, UntypedServiceImplementation } from '@grpc/grpc-js'
import { digest, prepareToken, type TokenSource } from './auth.js'
import { callGate, type Authorize, type MethodGate } from './call-gate.js'
import { RpcError } from './errors.js'
import { grpcJs } from './grpc-js.js'
import { bind, type ServiceBinding, type ServiceImpl } from './handlers.js'
import { HealthStatus } from './health.js'
import { defaultLogger, type DuckyLogger } from './log.js'
import { bidiCall, serverStreamCall, toStatus, unaryCall, type CallEnv } from './server-calls.js'
import { DEFAULT_MAX_MESSAGE_BYTES, methodPath, type ServiceDef } from './service.js'
import {
  grpcOptions,
  serverCredentials,
  serverLimits,
  type ServerTlsOptions,
  type TransportOptions,
} from './transport.js'
import { codecOf } from './wire.js'

export type ServeOptions = TransportOptions & {
  /** Interface to listen on. @default '127.0.0.1' */
  host?: string
  /** Port to listen on; 0 picks a free one (read it from `server.port`). @default 0 */
  port?: number
  /** Bearer token every call must carry (the Health service stays open). @default none: no auth */
  token?: TokenSource
  /**
   * The server's own check of each call's metadata, for more than one credential (per-job tokens,
   * say): throw or reject with an RpcError (UNAUTHENTICATED, PERMISSION_DENIED) to refuse the call.
   * Like `token` (and after it, when both are set), it runs before any request byte is read; the
   * Health service skips it. @default none
   * @example
   * authorize: (md) => { if (!known(md.get('authorization')[0])) throw new RpcError('UNAUTHENTICATED', 'unknown token;
   * pass …') }
   */
  authorize?: Authorize
  /** Serve TLS with these PEM files. @default plaintext */
  tls?: ServerTlsOptions
  /** More services on the same port, e.g. `tunnelService({ allow })`. */
  services?: readonly ServiceBinding[]
  /** @default logger('ducky') from rigging */
  logger?: DuckyLogger
}

export type ShutdownOptions = {
  /** How long in-flight calls may run before they are cancelled, in ms. @default 10000 */
  graceMs?: number
}

/** A running server. */
export type DuckyServer = {
  /** `host:port` to pass to `connect`. */
  readonly address: string
  readonly host: string
  readonly port: number
  /** Serving status reported by `grpc.health.v1.Health`; '' is the whole server. */
  readonly health: HealthStatus
  /** Stops accepting calls, lets in-flight calls finish for up to `graceMs`, then cancels the rest. */
  shutdown(opts?: ShutdownOptions): Promise<void>
  /** Cancels every call and closes every connection now. */
  forceShutdown(): void
}

const same = (b: Buffer) => b

/** The grpc-js definition and implementation of a bound service, and the gate of each of its methods. */
function grpcService(
  binding: ServiceBinding,
  env: CallEnv,
  gates: Map<string, MethodGate>,
): { definition: ServiceDefinition; implementation: UntypedServiceImplementation } {
  const { def, impl } = binding
  const definition: Record<string, ServiceDefinition[string]> = {}
  const implementation: UntypedServiceImplementation = {}
  for (const [name, m] of Object.entries(def.methods)) {
    const handler = impl[name]
    if (typeof handler !== 'function') {
      throw new RpcError(
        'INVALID_ARGUMENT',
        `service ${def.name}: no handler for method ${name}; add ${name} to the implementation`,
      )
    }
    const path = methodPath(def, name)
    const { encode, encodeResponse, decode } = codecOf(m.codec)
    definition[name] = {
      path,
      requestStream: m.kind === 'bidi',
      responseStream: m.kind !== 'unary',
      requestSerialize: encode,
      requestDeserialize: decode,
      // Responses arrive encoded by the gate, which checks their size (call-gate.ts).
      responseSerialize: same,
      responseDeserialize: decode,
    }
    gates.set(path, {
      path,
      auth: true,
      maxRequestBytes: m.maxRequestBytes,
      maxResponseBytes: m.maxResponseBytes,
      encode: encodeResponse,
    })
    const h = handler.bind(impl) as never
    implementation[name] =
      m.kind === 'unary'
        ? unaryCall(env, m, path, h)
        : m.kind === 'serverStream'
          ? serverStreamCall(env, m, path, h)
          : bidiCall(env, m, path, h)
  }
  return { definition, implementation }
}

/**
 * Starts a server for `def` (and `opts.services`) and resolves once it listens.
 * @example
 * const server = await serve(Echo, { ping: ({ text }) => ({ text }) , watch: async function* ({ n }) { for (let i = 0;
 * i < n; i++) yield { i } } }, { port: 0 })
 * const client = connect(Echo, server.address)
 * await server.shutdown({ graceMs: 5000 })
 */
export async function serve<S extends ServiceDef>(
  def: S,
  impl: ServiceImpl<S>,
  opts: ServeOptions = {},
): Promise<DuckyServer> {
  const log = opts.logger ?? defaultLogger()
  const host = opts.host ?? '127.0.0.1'
  const port = opts.port ?? 0
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new RpcError('INVALID_ARGUMENT', `port=${port} is not a TCP port; pass 0..65535 (0 picks a free port)`)
  }
  const token = opts.token === undefined ? undefined : prepareToken(opts.token)
  const env: CallEnv = { log }
  const creds = serverCredentials(opts.tls)
  const bindings = [bind(def, impl), ...(opts.services ?? [])]
  const names = new Set<string>()
  const gates = new Map<string, MethodGate>()
  const gate = callGate(gates, {
    log,
    token,
    tokenDigest: token && 'sync' in token ? digest(token.sync) : undefined,
    authorize: opts.authorize,
    toStatus: (err, method) => toStatus(env, err, method),
  })
  // The gate must be the only interceptor: it bounds the reader of the call grpc-js hands it.
  const grpc = new (grpcJs().Server)({
    ...grpcOptions(opts, serverLimits(bindings.flatMap((b) => Object.values(b.def.methods)))),
    interceptors: [gate],
  })
  const health = new HealthStatus()
  for (const b of bindings) {
    if (names.has(b.def.name))
      throw new RpcError('ALREADY_EXISTS', `service ${b.def.name} is added twice; pass each service once`)
    names.add(b.def.name)
    const s = grpcService(b, env, gates)
    grpc.addService(s.definition, s.implementation)
  }
  const h = health.grpcService()
  for (const { path } of Object.values(h.definition)) {
    gates.set(path, {
      path,
      auth: false,
      maxRequestBytes: DEFAULT_MAX_MESSAGE_BYTES,
      maxResponseBytes: DEFAULT_MAX_MESSAGE_BYTES,
      encode: undefined,
    })
  }
  grpc.addService(h.definition, h.implementation)

  const bracketed = host.includes(':') ? `[${host}]` : host
  const bound = await new Promise<number>((resolve, reject) =>
    grpc.bindAsync(`${bracketed}:${port}`, creds, (err, p) =>
      err
        ? reject(
            new RpcError(
              'UNAVAILABLE',
              `cannot listen on ${bracketed}:${port}: ${err.message}; pick a free port or another host`,
              { cause: err },
            ),
          )
        : resolve(p),
    ),
  )
  health.set('', 'SERVING')
  for (const n of names) health.set(n, 'SERVING')
  log.info(
    {
      address: `${bracketed}:${bound}`,
      services: [...names],
      tls: opts.tls !== undefined,
      auth: token !== undefined || opts.authorize !== undefined,
    },
    'server listening',
  )

  let stopping: Promise<void> | undefined
  return {
    address: `${bracketed}:${bound}`,
    host,
    port: bound,
    health,
    shutdown({ graceMs = 10_000 }: ShutdownOptions = {}) {
      stopping ??= new Promise<void>((resolve) => {
        health.close()
        const timer = setTimeout(() => {
          log.warn({ address: `${bracketed}:${bound}`, graceMs }, 'grace period over: cancelling in-flight calls')
          grpc.forceShutdown()
          resolve()
        }, graceMs)
        grpc.tryShutdown(() => {
          clearTimeout(timer)
          resolve()
        })
      }).then(() => log.info({ address: `${bracketed}:${bound}` }, 'server stopped'))
      return stopping
    },
    forceShutdown() {
      health.close()
      grpc.forceShutdown()
    },
  }
}
