/** @module The client side of one call of each kind: deadlines, cancellation, retries, stream pumping. */
import { setTimeout as sleep } from 'node:timers/promises'
import type { Client as GrpcClient, ClientDuplexStream, ClientReadableStream, Metadata } from '@grpc/grpc-js'
import { fromServiceError, RpcError } from './errors.js'
import type { DuckyLogger } from './log.js'
import { backoffMs, type RetryPolicy } from './retry-policy.js'
import type { MethodDef } from './service.js'
import { flowingChunks } from './flowing-chunks.js'
import { codecOf, type Boxed } from './wire.js'

type Codec = ReturnType<typeof codecOf>

export type CallOptions = {
  /** Give up after this long, in ms (per attempt when retrying). Overrides the client's default. */
  deadlineMs?: number
  /** Aborting cancels the call; the caller then sees an RpcError CANCELLED. */
  signal?: AbortSignal
  /** Extra request metadata. */
  metadata?: Readonly<Record<string, string>>
}

/** A stream of responses; iterate it with `for await`. Leaving the loop early cancels the call. */
export type ResponseStream<T> = AsyncIterable<T> & {
  /** Cancels the call; the iteration then ends with an RpcError CANCELLED. */
  cancel(): void
}

/** What every call of one client shares. */
export type Env = {
  grpc: GrpcClient
  metadata: (opts: CallOptions | undefined) => Metadata | Promise<Metadata>
  deadlineMs: number | undefined
  streamDeadlineMs: number | undefined
  retry: RetryPolicy
  log: DuckyLogger
}

/** A grpc-js deadline: milliseconds since the epoch (a number, cheaper than a Date per call). */
function deadlineOf(ms: number | undefined): number {
  return ms === undefined ? Infinity : Date.now() + ms
}

function cancelledError(method: string, signal: AbortSignal): RpcError {
  return new RpcError('CANCELLED', 'the caller aborted the call', { method, cause: signal.reason })
}

/** Retries a failed first attempt while the policy allows; `first` is that attempt's failure. */
async function retryAfter<T>(
  env: Env,
  def: MethodDef,
  method: string,
  signal: AbortSignal | undefined,
  first: unknown,
  attempt: () => Promise<T>,
): Promise<T> {
  let err = first
  for (let retry = 0; ; retry++) {
    const e = err as RpcError
    if (!def.idempotent || retry + 1 >= env.retry.maxAttempts || !env.retry.codes.includes(e.code) || signal?.aborted)
      throw e
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

/** One attempt of a unary call. A plain function with inline callbacks: no named closure per call. */
function unaryAttempt(
  env: Env,
  codec: Codec,
  method: string,
  request: unknown,
  opts: CallOptions,
  md: Metadata,
): Promise<unknown> {
  const { signal } = opts
  return new Promise<unknown>((resolve, reject) => {
    if (signal?.aborted) return reject(cancelledError(method, signal))
    // Only a call with a signal pays for the listener.
    const onAbort = signal ? () => call.cancel() : noop
    const call = env.grpc.makeUnaryRequest(
      method,
      codec.encode,
      codec.decode,
      { value: request },
      md,
      { deadline: deadlineOf(opts.deadlineMs ?? env.deadlineMs) },
      (err, res) => {
        if (signal) signal.removeEventListener('abort', onAbort)
        if (err) reject(signal?.aborted ? cancelledError(method, signal) : fromServiceError(err, method))
        else resolve((res as Boxed).value)
      },
    )
    if (signal) signal.addEventListener('abort', onAbort, { once: true })
  })
}

const noop = () => {}

function unaryRun(
  env: Env,
  def: MethodDef,
  codec: Codec,
  method: string,
  request: unknown,
  opts: CallOptions,
  md: Metadata,
): Promise<unknown> {
  // The common path is one promise; retries start only after a failure.
  const first = unaryAttempt(env, codec, method, request, opts, md)
  if (!def.idempotent) return first
  return first.catch((err: unknown) =>
    retryAfter(env, def, method, opts.signal, err, () => unaryAttempt(env, codec, method, request, opts, md)),
  )
}

export function unaryMethod(env: Env, def: MethodDef, method: string) {
  const codec = codecOf(def.codec)
  return (request: unknown, opts: CallOptions = {}): Promise<unknown> => {
    const md = env.metadata(opts)
    return md instanceof Promise
      ? md.then((m) => unaryRun(env, def, codec, method, request, opts, m))
      : unaryRun(env, def, codec, method, request, opts, md)
  }
}

/** Iterates one call's responses; cancels the call when the consumer leaves early. */
async function* responses(
  call: ClientReadableStream<Boxed> | ClientDuplexStream<Boxed, Boxed>,
  method: string,
  signal: AbortSignal | undefined,
  received: { any: boolean },
  failure: () => unknown,
): AsyncGenerator<unknown> {
  const onAbort = () => call.cancel()
  signal?.addEventListener('abort', onAbort, { once: true })
  try {
    // Flowing reads: one async layer per message fewer than `for await (… of call)`.
    for await (const m of flowingChunks<Boxed>(call)) {
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

export function serverStreamMethod(env: Env, def: MethodDef, method: string) {
  const codec = codecOf(def.codec)
  return (request: unknown, opts: CallOptions = {}) => {
    let call: ClientReadableStream<Boxed> | undefined
    let cancelled = false
    const { signal } = opts
    async function* gen(): AsyncGenerator<unknown> {
      const md = await env.metadata(opts)
      for (let retry = 0; ; retry++) {
        if (signal?.aborted || cancelled)
          throw signal?.aborted
            ? cancelledError(method, signal)
            : new RpcError('CANCELLED', 'cancelled by the caller', { method })
        call = env.grpc.makeServerStreamRequest(method, codec.encode, codec.decode, { value: request }, md, {
          deadline: deadlineOf(opts.deadlineMs ?? env.streamDeadlineMs),
        })
        const received = { any: false }
        try {
          yield* responses(call, method, signal, received, () => undefined)
          return
        } catch (err) {
          // Retry only before the first response: after it, a retry would repeat messages.
          const e = err as RpcError
          if (
            received.any ||
            !def.idempotent ||
            retry + 1 >= env.retry.maxAttempts ||
            !env.retry.codes.includes(e.code) ||
            signal?.aborted ||
            cancelled
          )
            throw e
          const delayMs = backoffMs(env.retry, retry)
          env.log.debug({ method, code: e.code, attempt: retry + 1, delayMs }, 'retrying call')
          await sleep(delayMs, undefined, signal ? { signal } : {}).catch(() => {
            throw cancelledError(method, signal!)
          })
        }
      }
    }
    return streamHandle(gen, () => {
      cancelled = true
      call?.cancel()
    })
  }
}

export function bidiMethod(env: Env, def: MethodDef, method: string) {
  const codec = codecOf(def.codec)
  return (requests: AsyncIterable<unknown> | Iterable<unknown>, opts: CallOptions = {}) => {
    let call: ClientDuplexStream<Boxed, Boxed> | undefined
    let cancelled = false
    const { signal } = opts
    async function* gen(): AsyncGenerator<unknown> {
      const md = await env.metadata(opts)
      if (signal?.aborted || cancelled)
        throw signal?.aborted
          ? cancelledError(method, signal)
          : new RpcError('CANCELLED', 'cancelled by the caller', { method })
      const c = (call = env.grpc.makeBidiStreamRequest(method, codec.encode, codec.decode, md, {
        deadline: deadlineOf(opts.deadlineMs ?? env.streamDeadlineMs),
      }))
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
