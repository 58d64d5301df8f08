/**
 * @module `startServer`: the API on @hono/node-server with its engine. `close()` shuts down
 * gracefully: new requests get 503, running ones may finish for `graceMs`, then the rest are
 * cancelled (streams end with finish_reason "abort", others get 503) and the port is freed.
 */
import { serve } from '@hono/node-server'
import type { ServerType } from '@hono/node-server'
import { setMaxListeners } from 'node:events'
import type { AddressInfo } from 'node:net'
import type { BpeTokenizer } from '@marin/datakit'
import type { CausalLM } from '@marin/levanter'
import { MetricsRegistry, logger } from '@marin/rigging'
import { MarinError } from '../errors.js'
import { createApp } from './app.js'
import { CHATML } from './chat-template.js'
import type { ChatTemplate } from './chat-template.js'
import type { AccessLogEntry } from './app.js'
import { DEFAULT_MAX_PREFILL_TOKENS, Engine } from './engine.js'

const log = logger('marin')

export type ServeOptions = {
  readonly model: CausalLM
  readonly tokenizer: BpeTokenizer
  /** How chat messages become the prompt (see `loadModel`'s `chatTemplate`). @default ChatML */
  readonly chatTemplate?: ChatTemplate
  /** The id `/v1/models` lists and requests may name. @default 'marin' */
  readonly name?: string
  /** 0 picks a free port. @default 8000 */
  readonly port?: number
  /** @default '127.0.0.1' */
  readonly host?: string
  /** Bearer key every /v1 request must carry; none means open. */
  readonly apiKey?: string
  /** @default 16 */
  readonly maxBatch?: number
  /** The weights decode steps read: float32, or bf16 copies made at start (see `EngineOptions`). @default 'fp32' */
  readonly weights?: 'fp32' | 'bf16'
  /** Prompt tokens prefilled per scheduler step at most, the chunk size of longer prompts (see `EngineOptions`).
   * @default {@link DEFAULT_MAX_PREFILL_TOKENS} */
  readonly maxPrefillTokens?: number
  /** @default the model's context length */
  readonly maxTokensCap?: number
  /** Most sequences (prompts × n) one request may ask for; more → 400 naming `n` or `prompt`. @default 256 */
  readonly maxSequencesPerRequest?: number
  /** Most sequences waiting for a slot; a request that does not fit → 429 with `Retry-After`. At least
   * `maxSequencesPerRequest`. @default 1024 */
  readonly maxQueuedSequences?: number
  /** @default 1 MiB */
  readonly maxBodyBytes?: number
  /** Metrics land here (served at /metrics). @default a new registry */
  readonly metrics?: MetricsRegistry
  /** Where each request's access-log line goes. @default an info line on the `marin` logger */
  readonly accessLog?: (e: AccessLogEntry) => void
}

export type { AccessLogEntry }

export type RunningServer = {
  readonly url: string
  readonly port: number
  readonly engine: Engine
  readonly metrics: MetricsRegistry
  /** Stop accepting, let running requests finish for `graceMs` (default 5000), cancel the rest, close. */
  close(opts?: { graceMs?: number }): Promise<void>
}

/** Serves `model` with the OpenAI-compatible API; resolves once listening. */
export async function startServer(o: ServeOptions): Promise<RunningServer> {
  if (o.tokenizer.vocabSize > o.model.config.vocabSize) {
    throw new Error(
      `tokenizer has ${o.tokenizer.vocabSize} ids but the model only ` +
        `${o.model.config.vocabSize}; use the tokenizer the model was ` +
        `trained with`,
    )
  }
  const maxSequencesPerRequest = o.maxSequencesPerRequest ?? 256,
    maxQueued = o.maxQueuedSequences ?? 1024
  for (const [k, v] of [
    ['maxBatch', o.maxBatch ?? 16],
    ['maxPrefillTokens', o.maxPrefillTokens ?? DEFAULT_MAX_PREFILL_TOKENS],
    ['maxSequencesPerRequest', maxSequencesPerRequest],
    ['maxQueuedSequences', maxQueued],
  ] as const) {
    if (!Number.isInteger(v) || v < 1) throw new MarinError('BAD_USAGE', `serve: ${k} ${v} must be a whole number >= 1`)
  }
  if (maxSequencesPerRequest > maxQueued) {
    throw new MarinError(
      'BAD_USAGE',
      `serve: maxSequencesPerRequest ${maxSequencesPerRequest} is ` +
        `above maxQueuedSequences ${maxQueued}, so a request at the cap ` +
        `could never be queued; raise the queue bound or lower the cap`,
    )
  }
  const metrics = o.metrics ?? new MetricsRegistry()
  const engine = new Engine(o.model, {
    maxBatch: o.maxBatch ?? 16,
    maxPrefillTokens: o.maxPrefillTokens ?? DEFAULT_MAX_PREFILL_TOKENS,
    maxQueued,
    metrics,
    vocabLimit: o.tokenizer.vocabSize,
    ...(o.weights ? { weights: o.weights } : {}),
  })
  const stopping = new AbortController()
  setMaxListeners(0, stopping.signal) // every running request listens for shutdown
  let draining = false
  const name = o.name ?? 'marin'
  const app = createApp({
    name,
    created: Math.floor(Date.now() / 1000),
    accessLog: o.accessLog ?? ((e) => log.info({ ...e, ms: Math.round(e.ms * 10) / 10 }, 'request')),
    model: o.model,
    tokenizer: o.tokenizer,
    chatTemplate: o.chatTemplate ?? CHATML,
    engine,
    metrics,
    shutdown: stopping.signal,
    draining: () => draining,
    maxTokensCap: o.maxTokensCap ?? o.model.config.seqLen,
    maxBodyBytes: o.maxBodyBytes ?? 1 << 20,
    maxSequencesPerRequest,
    ...(o.apiKey !== undefined ? { apiKey: o.apiKey } : {}),
  })
  const host = o.host ?? '127.0.0.1'
  const server = await new Promise<ServerType>((resolve, reject) => {
    const s = serve({ fetch: app.fetch, port: o.port ?? 8000, hostname: host }, () => resolve(s))
    s.once('error', reject)
  })
  const port = (server.address() as AddressInfo).port
  const url = `http://${host}:${port}`
  log.info(
    { url, model: name, maxBatch: engine.maxBatch, maxSequencesPerRequest, maxQueuedSequences: maxQueued },
    'serving',
  )
  let closing: Promise<void> | undefined
  return {
    url,
    port,
    engine,
    metrics,
    close: (opts = {}) =>
      (closing ??= (async () => {
        draining = true
        log.info({ url }, 'shutting down')
        const closed = new Promise<void>((r) => server.close(() => r()))
        const grace = new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), opts.graceMs ?? 5000).unref())
        if ((await Promise.race([engine.whenIdle(), grace])) === 'timeout') {
          stopping.abort()
          engine.cancelAll()
          await engine.whenIdle()
        }
        stopping.abort()
        // Responses of cancelled requests are flushed before sockets are dropped.
        await new Promise((r) => setTimeout(r, 50))
        if ('closeAllConnections' in server) server.closeAllConnections()
        await closed
      })()),
  }
}
