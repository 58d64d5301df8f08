/**
 * @module The OpenAI-compatible HTTP API on hono: `/v1/models`, `/v1/completions`,
 * `/v1/chat/completions` (both streaming as server-sent events), `/health` and `/metrics`. A known
 * path asked with another method gets 405 with `Allow`.
 */
import { timingSafeEqual } from 'node:crypto'
import { Hono } from 'hono'
import { bodyLimit } from 'hono/body-limit'
import type { BpeTokenizer } from '@marin/datakit'
import type { CausalLM } from '@marin/levanter'
import { PROMETHEUS_CONTENT_TYPE } from '@marin/rigging'
import type { MetricsRegistry } from '@marin/rigging'
import { ApiError } from './api-error.js'
import { chatRoute } from './chat-route.js'
import type { ChatTemplate } from './chat-template.js'
import { completionsRoute } from './completions-route.js'
import type { Engine } from './engine.js'
import { routeContext } from './route-context.js'

/** One line of the access log: a request and its answer. */
export type AccessLogEntry = {
  readonly method: string
  readonly path: string
  readonly status: number
  /** Until the response's head was ready (a stream's body may run on after), ms. */
  readonly ms: number
}

export type AppOptions = {
  readonly name: string
  /** `created` of the served model in `/v1/models`, Unix seconds: fixed when the server starts. */
  readonly created: number
  /** Called once per request. */
  readonly accessLog: (e: AccessLogEntry) => void
  readonly model: CausalLM
  readonly tokenizer: BpeTokenizer
  /** How chat messages become the prompt. */
  readonly chatTemplate: ChatTemplate
  readonly engine: Engine
  readonly metrics: MetricsRegistry
  /** Largest `max_tokens` accepted. */
  readonly maxTokensCap: number
  /** Most sequences (prompts × n) one request may ask for. */
  readonly maxSequencesPerRequest: number
  /** Largest request body, bytes. */
  readonly maxBodyBytes: number
  readonly apiKey?: string
  /** Aborted when the grace period ends: running requests end as cancelled. */
  readonly shutdown: AbortSignal
  /** True once shutdown began: new requests get 503. */
  readonly draining: () => boolean
}

export function createApp(o: AppOptions): Hono {
  const app = new Hono()
  const requests = o.metrics.counter('marin_serve_requests_total', {
    help: 'HTTP requests',
    labelNames: ['route', 'status'],
  })
  const ttft = o.metrics.histogram('marin_serve_ttft_seconds', {
    help: 'time to first token',
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
  })
  const seqLen = o.model.config.seqLen

  app.use('*', async (c, next) => {
    const t0 = performance.now()
    await next()
    requests.inc(1, { route: c.req.routePath || 'none', status: c.res.status })
    o.accessLog({ method: c.req.method, path: c.req.path, status: c.res.status, ms: performance.now() - t0 })
  })
  app.onError((err, c) => {
    const e =
      err instanceof ApiError ? err : new ApiError(500, `internal error: ${err.message}`, null, 'internal_error')
    return c.json(e.body(), e.status, e.headers)
  })
  app.notFound((c) =>
    c.json(
      new ApiError(
        404,
        `no route ${c.req.method} ${c.req.path}; see /v1/models, /v1/completions, /v1/chat/completions`,
        null,
        'not_found',
      ).body(),
      404,
    ),
  )

  app.get('/health', (c) => c.json({ status: o.draining() ? 'stopping' : 'ok', ...o.engine.load }))
  app.get('/metrics', (c) => c.body(o.metrics.toPrometheus(), 200, { 'content-type': PROMETHEUS_CONTENT_TYPE }))

  app.use('/v1/*', async (c, next) => {
    if (o.apiKey === undefined) return next()
    const got = Buffer.from(/^Bearer (.+)$/.exec(c.req.header('authorization') ?? '')?.[1] ?? '')
    const want = Buffer.from(o.apiKey)
    if (got.length !== want.length || !timingSafeEqual(got, want)) {
      throw new ApiError(401, 'missing or wrong API key; send "Authorization: Bearer <key>"', null, 'invalid_api_key')
    }
    return next()
  })
  app.use(
    '/v1/*',
    bodyLimit({
      maxSize: o.maxBodyBytes,
      onError: () => {
        throw new ApiError(413, `request body is larger than ${o.maxBodyBytes} bytes`, null, 'request_too_large')
      },
    }),
  )

  app.get('/v1/models', (c) =>
    c.json({
      object: 'list',
      data: [{ id: o.name, object: 'model', created: o.created, owned_by: 'marin', max_model_len: seqLen }],
    }),
  )

  const x = routeContext(o, (s) => ttft.observe(s))
  completionsRoute(app, x)
  chatRoute(app, x)

  // Registered after the routes: reached only when no handler took the method.
  const allowed = {
    '/health': 'GET, HEAD',
    '/metrics': 'GET, HEAD',
    '/v1/models': 'GET, HEAD',
    '/v1/completions': 'POST',
    '/v1/chat/completions': 'POST',
  }
  for (const [route, allow] of Object.entries(allowed)) {
    app.all(route, (c) => {
      throw new ApiError(
        405,
        `${c.req.method} is not allowed on ${route}; use ${allow.split(', ')[0]}`,
        null,
        'method_not_allowed',
        { Allow: allow },
      )
    })
  }
  return app
}
