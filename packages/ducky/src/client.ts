/** @module `connect(def, address, opts)`: a client whose methods are typed from the service's schemas. */
import { setTimeout as sleep } from 'node:timers/promises'
import { Client as GrpcClient, Metadata } from '@grpc/grpc-js'
import type { ChannelOptions, ClientDuplexStream, ClientReadableStream } from '@grpc/grpc-js'
import type { z } from 'zod'
import { prepareToken, type TokenSource } from './auth.js'
import { fromServiceError, RpcError } from './errors.js'
import { defaultLogger, type DuckyLogger } from './log.js'
import { backoffMs, retryPolicy, type RetryOptions, type RetryPolicy } from './retry-policy.js'
import { methodPath, type MethodDef, type ServiceDef } from './service.js'
import { clientCredentials, grpcOptions, type ClientTlsOptions, type TransportOptions } from './transport.js'
import { codecOf, type Boxed } from './wire.js'

export type CallOptions = {
  /** Give up after this long, in ms (per attempt when retrying). Overrides the client's default. */
  deadlineMs?: number
  /** Aborting cancels the call; the caller then sees an RpcError CANCELLED. */
  signal?: AbortSignal
  /** Extra request metadata. */
  metadata?: Readonly<Record<string, string>>
}

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

/** A stream of responses; iterate it with `for await`. Leaving the loop early cancels the call. */
export type ResponseStream<T> = AsyncIterable<T> & {
  /** Cancels the call; the iteration then ends with an RpcError CANCELLED. */
  cancel(): void
}

/** A client-side method: `z.input` of the request in, `z.output` of the response out. */
export type ClientMethodOf<D> =
  D extends MethodDef<'unary', infer Q, infer S>
    ? (request: z.input<Q>, opts?: CallOptions) => Promise<z.output<S>>
    : D extends MethodDef<'serverStream', infer Q, infer S>
      ? (request: z.input<Q>, opts?: CallOptions) => ResponseStream<z.output<S>>
      : D extends MethodDef<'bidi', infer Q, infer S>
        ? (requests: AsyncIterable<z.input<Q>> | Iterable<z.input<Q>>, opts?: CallOptions) => ResponseStream<z.output<S>>
        : never

export type DuckyClient<S extends ServiceDef> = { readonly [K in keyof S['methods']]: ClientMethodOf<S['methods'][K]> } & {
  /** Resolves once connected; rejects with UNAVAILABLE after `timeoutMs`. */
  ready(timeoutMs?: number): Promise<void>
  /** Closes the channel; calls in flight are cancelled. */
  close(): void
}

type Env = {
  grpc: GrpcClient
  metadata: (opts: CallOptions | undefined) => Metadata | Promise<Metadata>
  deadlineMs: number | undefined
  streamDeadlineMs: number | undefined
  retry: RetryPolicy
  log: DuckyLogger
}

function deadlineOf(ms: number | undefined): Date | number {
  return ms === undefined ? Infinity : new Date(Date.now() + ms)
}

function cancelledError(method: string, signal: AbortSignal): RpcError {
  return new RpcError('CANCELLED', 'the caller aborted the call', { method, cause: signal.reason })
}

/** Retries a failed first attempt while the policy allows; `first` is that attempt's failure. */
async function retryAfter<T>(env: Env, def: MethodDef, method: string, signal: AbortSignal | undefined, first: unknown, attempt: () => Promise<T>): Promise<T> {
  let err = first
  for (let retry = 0; ; retry++) {
    const e = err as RpcError
    if (!def.idempotent || retry + 1 >= env.retry.maxAttempts || !env.retry.codes.includes(e.code) || signal?.aborted) throw e
    const delayMs = backoffMs(env.retry, retry)
    env.log.debug({ method, code: e.code, attempt: retry + 1, delayMs }, 'retrying call')
    try {
      await sleep(delayMs, undefined, signal ? { signal } : {})
    } catch {
      throw cancelledError(method, signal!)
    }
    try {
      return await attempt()
    } catch (next) {
      err = next
    }
  }
}

function unaryMethod(env: Env, def: MethodDef, method: string) {
  const codec = codecOf(def.codec)
  const run = (request: unknown, opts: CallOptions, md: Metadata): Promise<unknown> => {
    const { signal } = opts
    const once = () =>
      new Promise<unknown>((resolve, reject) => {
        if (signal?.aborted) return reject(cancelledError(method, signal))
        const onAbort = () => call.cancel()
        const call = env.grpc.makeUnaryRequest(method, codec.encode, codec.decode, { value: request }, md, { deadline: deadlineOf(opts.deadlineMs ?? env.deadlineMs) }, (err, res) => {
          if (signal) signal.removeEventListener('abort', onAbort)
          if (err) reject(signal?.aborted ? cancelledError(method, signal) : fromServiceError(err, method))
          else resolve((res as Boxed).value)
        })
        if (signal) signal.addEventListener('abort', onAbort, { once: true })
      })
    // The common path is one promise; retries start only after a failure.
    return once().catch((err: unknown) => retryAfter(env, def, method, signal, err, once))
  }
  return (request: unknown, opts: CallOptions = {}): Promise<unknown> => {
    const md = env.metadata(opts)
    return md instanceof Promise ? md.then((m) => run(request, opts, m)) : run(request, opts, md)
  }
}

/** Iterates one call's responses; cancels the call when the consumer leaves early. */
async function* responses(call: ClientReadableStream<Boxed> | ClientDuplexStream<Boxed, Boxed>, method: string, signal: AbortSignal | undefined, received: { any: boolean }, failure: () => unknown): AsyncGenerator<unknown> {
  const onAbort = () => call.cancel()
  signal?.addEventListener('abort', onAbort, { once: true })
  try {
    for await (const m of call) {
      received.any = true
      yield (m as Boxed).value
    }
  } catch (err) {
    const why = failure()
    if (why !== undefined) throw why
    throw signal?.aborted ? cancelledError(method, signal) : fromServiceError(err, method)
  } finally {
    signal?.removeEventListener('abort', onAbort)
    call.cancel()
  }
}

function streamHandle(gen: () => AsyncGenerator<unknown>, cancel: () => void): ResponseStream<unknown> {
  let it: AsyncGenerator<unknown> | undefined
  return {
    [Symbol.asyncIterator]: () => (it ??= gen()),
    cancel,
  }
}

function serverStreamMethod(env: Env, def: MethodDef, method: string) {
  const codec = codecOf(def.codec)
  return (request: unknown, opts: CallOptions = {}) => {
    let call: ClientReadableStream<Boxed> | undefined
    let cancelled = false
    const { signal } = opts
    async function* gen(): AsyncGenerator<unknown> {
      const md = await env.metadata(opts)
      for (let retry = 0; ; retry++) {
        if (signal?.aborted || cancelled) throw signal?.aborted ? cancelledError(method, signal) : new RpcError('CANCELLED', 'cancelled by the caller', { method })
        call = env.grpc.makeServerStreamRequest(method, codec.encode, codec.decode, { value: request }, md, { deadline: deadlineOf(opts.deadlineMs ?? env.streamDeadlineMs) })
        const received = { any: false }
        try {
          yield* responses(call, method, signal, received, () => undefined)
          return
        } catch (err) {
          // Retry only before the first response: after it, a retry would repeat messages.
          const e = err as RpcError
          if (received.any || !def.idempotent || retry + 1 >= env.retry.maxAttempts || !env.retry.codes.includes(e.code) || signal?.aborted || cancelled) throw e
          await sleep(backoffMs(env.retry, retry))
        }
      }
    }
    return streamHandle(gen, () => {
      cancelled = true
      call?.cancel()
    })
  }
}

function bidiMethod(env: Env, def: MethodDef, method: string) {
  const codec = codecOf(def.codec)
  return (requests: AsyncIterable<unknown> | Iterable<unknown>, opts: CallOptions = {}) => {
    let call: ClientDuplexStream<Boxed, Boxed> | undefined
    let cancelled = false
    const { signal } = opts
    async function* gen(): AsyncGenerator<unknown> {
      const md = await env.metadata(opts)
      if (signal?.aborted || cancelled) throw signal?.aborted ? cancelledError(method, signal) : new RpcError('CANCELLED', 'cancelled by the caller', { method })
      const c = (call = env.grpc.makeBidiStreamRequest(method, codec.encode, codec.decode, md, { deadline: deadlineOf(opts.deadlineMs ?? env.streamDeadlineMs) }))
      let finished = false
      let pumpError: unknown
      c.on('status', () => (finished = true))
      const waitDrain = () =>
        new Promise<void>((resolve) => {
          const done = () => {
            c.off('drain', done)
            c.off('status', done)
            resolve()
          }
          c.on('drain', done)
          c.on('status', done)
        })
      // Requests flow while responses are read; the end of `requests` half-closes the call.
      void (async () => {
        try {
          for await (const r of requests) {
            if (finished) return
            if (!c.write({ value: r })) await waitDrain()
          }
          if (!finished) c.end()
        } catch (err) {
          pumpError = err
          c.cancel()
        }
      })()
      yield* responses(c, method, signal, { any: false }, () => pumpError)
      if (pumpError !== undefined) throw pumpError
    }
    return streamHandle(gen, () => {
      cancelled = true
      call?.cancel()
    })
  }
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
    throw new RpcError('INVALID_ARGUMENT', `address ${JSON.stringify(address)} is empty; pass host:port of a ducky server`)
  }
  const { creds, options: tlsOptions } = clientCredentials(opts.tls)
  const grpc = new GrpcClient(address, creds, {
    // Reconnect quickly after a server restart, so retries find it.
    'grpc.initial_reconnect_backoff_ms': 100,
    'grpc.max_reconnect_backoff_ms': 1000,
    ...opts.channelOptions,
    ...grpcOptions(opts),
    ...tlsOptions,
  })
  const token = opts.token === undefined ? undefined : prepareToken(opts.token)
  const build = (t: string | undefined, o: CallOptions | undefined) => {
    const md = new Metadata()
    for (const [k, v] of Object.entries(o?.metadata ?? {})) md.set(k, v)
    if (t !== undefined) md.set('authorization', `Bearer ${t}`)
    return md
  }
  const env: Env = {
    grpc,
    metadata: token === undefined ? (o) => build(undefined, o) : 'sync' in token ? (o) => build(token.sync, o) : async (o) => build(await token.load(), o),
    deadlineMs: opts.deadlineMs ?? 30_000,
    streamDeadlineMs: opts.streamDeadlineMs,
    retry: retryPolicy(opts.retry),
    log: opts.logger ?? defaultLogger(),
  }
  const client: Record<string, unknown> = {
    ready: (timeoutMs = 10_000) =>
      new Promise<void>((resolve, reject) =>
        grpc.waitForReady(Date.now() + timeoutMs, (err) =>
          err ? reject(new RpcError('UNAVAILABLE', `no connection to ${address} within ${timeoutMs} ms (${err.message}); check that the server runs and the address is right`, { cause: err })) : resolve(),
        ),
      ),
    close: () => grpc.close(),
  }
  for (const [name, m] of Object.entries(def.methods)) {
    const path = methodPath(def, name)
    client[name] = m.kind === 'unary' ? unaryMethod(env, m, path) : m.kind === 'serverStream' ? serverStreamMethod(env, m, path) : bidiMethod(env, m, path)
  }
  return client as DuckyClient<S>
}
