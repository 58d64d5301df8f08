/** @module `connect(def, address, opts)`: a client whose methods are typed from the service's schemas. */
import type { Client as GrpcClient, Metadata } from '@grpc/grpc-js'
import type { ChannelOptions } from '@grpc/grpc-js'
import type { z } from 'zod'
import { prepareToken, type TokenSource } from './auth.js'
import {
  bidiMethod,
  serverStreamMethod,
  unaryMethod,
  type CallOptions,
  type Env,
  type ResponseStream,
} from './client-calls.js'
import { RpcError } from './errors.js'
import { grpcJs } from './grpc-js.js'
import { defaultLogger, type DuckyLogger } from './log.js'
import { retryPolicy, type RetryOptions } from './retry-policy.js'
import { methodPath, type MethodDef, type ServiceDef } from './service.js'
import {
  clientCredentials,
  clientLimits,
  grpcOptions,
  type ClientTlsOptions,
  type TransportOptions,
} from './transport.js'

export type { CallOptions, ResponseStream } from './client-calls.js'

export type ConnectOptions = TransportOptions & {
  /** Bearer token sent on every call. */
  token?: TokenSource
  /** Connect with TLS (`true`: trust the system roots). @default plaintext */
  tls?: ClientTlsOptions | true
  /** Deadline of unary calls, in ms. @default 30000 */
  deadlineMs?: number
  /** Deadline of streaming calls, in ms. @default none: streams such as tunnels may live for hours */
  streamDeadlineMs?: number
  /** Retries of idempotent methods. */
  retry?: RetryOptions
  /** More grpc-js channel options; ducky's own settings win on conflict. */
  channelOptions?: ChannelOptions
  /** @default logger('ducky') from rigging */
  logger?: DuckyLogger
}

/** A client-side method: `z.input` of the request in, `z.output` of the response out. */
export type ClientMethodOf<D> =
  D extends MethodDef<'unary', infer Q, infer S>
    ? (request: z.input<Q>, opts?: CallOptions) => Promise<z.output<S>>
    : D extends MethodDef<'serverStream', infer Q, infer S>
      ? (request: z.input<Q>, opts?: CallOptions) => ResponseStream<z.output<S>>
      : D extends MethodDef<'bidi', infer Q, infer S>
        ? (
            requests: AsyncIterable<z.input<Q>> | Iterable<z.input<Q>>,
            opts?: CallOptions,
          ) => ResponseStream<z.output<S>>
        : never

export type DuckyClient<S extends ServiceDef> = {
  readonly [K in keyof S['methods']]: ClientMethodOf<S['methods'][K]>
} & {
  /** Resolves once connected; rejects with UNAVAILABLE after `timeoutMs`. */
  ready(timeoutMs?: number): Promise<void>
  /** Closes the channel; calls in flight are cancelled. */
  close(): void
}

/**
 * @internal The grpc-js channel `connect` builds for `address` to call `def`, and the metadata of
 * one call on it: `extra` entries plus the bearer token, synchronously unless the token loads
 * asynchronously. ducky's tunnel makes its raw byte-stream calls through the same two. The
 * channel takes messages up to the largest limit `def` declares (the server holds each method
 * to its own).
 */
export function openChannel(
  address: string,
  def: ServiceDef,
  opts: Pick<ConnectOptions, 'tls' | 'token' | 'channelOptions'> & TransportOptions,
): { grpc: GrpcClient; metadata: (extra?: Readonly<Record<string, string>>) => Metadata | Promise<Metadata> } {
  const { creds, options: tlsOptions } = clientCredentials(opts.tls)
  const { Client, Metadata } = grpcJs()
  const grpc = new Client(address, creds, {
    // Reconnect quickly after a server restart, so retries find it.
    'grpc.initial_reconnect_backoff_ms': 100,
    'grpc.max_reconnect_backoff_ms': 1000,
    ...opts.channelOptions,
    ...grpcOptions(opts, clientLimits(def)),
    ...tlsOptions,
  })
  const token = opts.token === undefined ? undefined : prepareToken(opts.token)
  const build = (auth: string | undefined, extra: Readonly<Record<string, string>> | undefined) => {
    const md = new Metadata()
    if (extra !== undefined) for (const k of Object.keys(extra)) md.set(k, extra[k]!)
    if (auth !== undefined) md.set('authorization', auth)
    return md
  }
  if (token === undefined || 'sync' in token) {
    const bearer = token && `Bearer ${token.sync}`
    return { grpc, metadata: (extra) => build(bearer, extra) }
  }
  return { grpc, metadata: async (extra) => build(`Bearer ${await token.load()}`, extra) }
}

/**
 * A typed client for `def` at `address` (`host:port`). Connects lazily on the first call.
 * @example
 * const client = connect(Echo, server.address, { token, deadlineMs: 5000 })
 * const { text } = await client.ping({ text: 'hi' })
 * for await (const { i } of client.watch({ n: 3 })) console.log(i)
 */
export function connect<S extends ServiceDef>(def: S, address: string, opts: ConnectOptions = {}): DuckyClient<S> {
  if (typeof address !== 'string' || address.trim() === '') {
    throw new RpcError(
      'INVALID_ARGUMENT',
      `address ${JSON.stringify(address)} is empty; pass host:port of a ducky server`,
    )
  }
  const { grpc, metadata } = openChannel(address, def, opts)
  const env: Env = {
    grpc,
    metadata: (o) => metadata(o?.metadata),
    deadlineMs: opts.deadlineMs ?? 30_000,
    streamDeadlineMs: opts.streamDeadlineMs,
    retry: retryPolicy(opts.retry),
    log: opts.logger ?? defaultLogger(),
  }
  const client: Record<string, unknown> = {
    ready: (timeoutMs = 10_000) =>
      new Promise<void>((resolve, reject) =>
        grpc.waitForReady(Date.now() + timeoutMs, (err) =>
          err
            ? reject(
                new RpcError(
                  'UNAVAILABLE',
                  `no connection to ${address} within ${timeoutMs} ms (` +
                    `${err.message}); check that the server runs and the address is right`,
                  { cause: err },
                ),
              )
            : resolve(),
        ),
      ),
    close: () => grpc.close(),
  }
  for (const [name, m] of Object.entries(def.methods)) {
    const path = methodPath(def, name)
    client[name] =
      m.kind === 'unary'
        ? unaryMethod(env, m, path)
        : m.kind === 'serverStream'
          ? serverStreamMethod(env, m, path)
          : bidiMethod(env, m, path)
  }
  return client as DuckyClient<S>
}
