/**
 * @module The OpenAI-compatible HTTP API on hono: `/v1/models`, `/v1/completions`,
 * `/v1/chat/completions` (both streaming as server-sent events), `/health` and `/metrics`.
 */
import { randomBytes, randomInt, timingSafeEqual } from 'node:crypto'
import { Hono } from 'hono'
import type { Context } from 'hono'
import { bodyLimit } from 'hono/body-limit'
import { streamSSE } from 'hono/streaming'
import type { BpeTokenizer } from '@marin/datakit'
import type { CausalLM } from '@marin/levanter'
import { PROMETHEUS_CONTENT_TYPE } from '@marin/rigging'
import type { MetricsRegistry } from '@marin/rigging'
import { ApiError } from './api-error.js'
import { ChatRequest, CompletionRequest, describeIssue } from './api-types.js'
import { CHAT_END, renderChat } from './chat-template.js'
import { runChoice } from './choice-runner.js'
import type { ChoiceParams, ChoiceResult } from './choice-runner.js'
import type { Engine, TokenEvent } from './engine.js'

export type AppOptions = {
  readonly name: string
  readonly model: CausalLM
  readonly tokenizer: BpeTokenizer
  readonly engine: Engine
  readonly metrics: MetricsRegistry
  /** Largest `max_tokens` accepted. */
  readonly maxTokensCap: number
  /** Largest request body, bytes. */
  readonly maxBodyBytes: number
  readonly apiKey?: string
  /** Aborted when the grace period ends: running requests end as cancelled. */
  readonly shutdown: AbortSignal
  /** True once shutdown began: new requests get 503. */
  readonly draining: () => boolean
}

const now = () => Math.floor(Date.now() / 1000)
const reqId = (p: string) => `${p}-${randomBytes(12).toString('hex')}`

export function createApp(o: AppOptions): Hono {
  const app = new Hono()
  const requests = o.metrics.counter('marin_serve_requests_total', { help: 'HTTP requests', labelNames: ['route', 'status'] })
  const ttft = o.metrics.histogram('marin_serve_ttft_seconds', { help: 'time to first token', buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10] })
  const seqLen = o.model.config.seqLen
  const tokStr = (id: number) => o.tokenizer.decode([id])

  app.use('*', async (c, next) => {
    await next()
    requests.inc(1, { route: c.req.routePath || 'none', status: c.res.status })
  })
  app.onError((err, c) => {
    const e = err instanceof ApiError ? err : new ApiError(500, `internal error: ${err.message}`, null, 'internal_error')
    return c.json(e.body(), e.status)
  })
  app.notFound((c) => c.json(new ApiError(404, `no route ${c.req.method} ${c.req.path}; see /v1/models, /v1/completions, /v1/chat/completions`, null, 'not_found').body(), 404))

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
  app.use('/v1/*', bodyLimit({ maxSize: o.maxBodyBytes, onError: () => { throw new ApiError(413, `request body is larger than ${o.maxBodyBytes} bytes`, null, 'request_too_large') } }))

  app.get('/v1/models', (c) => c.json({ object: 'list', data: [{ id: o.name, object: 'model', created: now(), owned_by: 'marin', max_model_len: seqLen }] }))

  async function parse<T>(c: Context, schema: { safeParse(x: unknown): { success: true; data: T } | { success: false; error: import('zod').ZodError } }): Promise<T> {
    if (o.draining()) throw new ApiError(503, 'the server is shutting down; retry on another replica', null, 'shutting_down')
    let json: unknown
    try {
      json = JSON.parse(await c.req.text())
    } catch {
      throw new ApiError(400, 'request body is not valid JSON', null, 'invalid_json')
    }
    if (typeof json !== 'object' || json === null || Array.isArray(json)) throw new ApiError(400, 'request body must be a JSON object', null, 'invalid_request')
    const r = schema.safeParse(json)
    if (!r.success) {
      const { param, message } = describeIssue(r.error)
      throw new ApiError(400, message, param, 'invalid_value')
    }
    return r.data
  }

  function checkModel(model: string | undefined): void {
    if (model !== undefined && model !== o.name) throw new ApiError(404, `model "${model}" is not served here; this server serves "${o.name}"`, 'model', 'model_not_found')
  }

  function encode(text: string, param: string): number[] {
    const ids = o.tokenizer.encode(text)
    if (ids.length === 0) throw new ApiError(400, `${param}: is empty; give at least one token of text`, param, 'invalid_value')
    if (ids.length > seqLen) throw new ApiError(400, `${param}: ${ids.length} tokens exceed the model's context of ${seqLen}; shorten it`, param, 'context_length_exceeded')
    return ids
  }

  function checkMax(n: number, param: string): number {
    if (n > o.maxTokensCap) throw new ApiError(400, `${param}: ${n} is above this server's limit of ${o.maxTokensCap}`, param, 'invalid_value')
    return n
  }

  /** Runs every choice; aborts them all when the client goes away or the server stops. */
  async function runAll(c: Context, params: ChoiceParams[], abort: AbortController): Promise<ChoiceResult[]> {
    const onStop = () => abort.abort()
    o.shutdown.addEventListener('abort', onStop)
    c.req.raw.signal.addEventListener('abort', onStop)
    try {
      const results = await Promise.all(params.map((p) => runChoice(o.engine, o.tokenizer, { ...p, signal: abort.signal })))
      for (const r of results) if (r.ttftMs !== undefined) ttft.observe(r.ttftMs / 1000)
      return results
    } finally {
      o.shutdown.removeEventListener('abort', onStop)
    }
  }

  const completionLogprobs = (events: readonly TokenEvent[], k: number, offset0: number, firstNull: boolean) => {
    let off = offset0
    return {
      tokens: events.map((e) => tokStr(e.token)),
      token_logprobs: events.map((e, i) => (firstNull && i === 0 ? null : e.logprob)),
      top_logprobs: events.map((e, i) => (firstNull && i === 0 ? null : Object.fromEntries(e.top.slice(0, k).map(([id, lp]) => [tokStr(id), lp])))),
      text_offset: events.map((e) => {
        const at = off
        off += tokStr(e.token).length
        return at
      }),
    }
  }

  app.post('/v1/completions', async (c) => {
    const r = await parse(c, CompletionRequest)
    checkModel(r.model)
    const prompts = typeof r.prompt === 'string' ? [r.prompt] : r.prompt.every((x) => typeof x === 'number') ? [r.prompt as number[]] : (r.prompt as string[])
    const ids = prompts.map((p, i) => {
      const param = typeof r.prompt === 'string' ? 'prompt' : `prompt.${i}`
      if (typeof p !== 'string') {
        if (p.length > seqLen) throw new ApiError(400, `prompt: ${p.length} tokens exceed the model's context of ${seqLen}; shorten it`, 'prompt', 'context_length_exceeded')
        if (p.some((t) => t >= o.model.config.vocabSize)) throw new ApiError(400, `prompt: token ids must be below the vocabulary size ${o.model.config.vocabSize}`, 'prompt', 'invalid_value')
        return p
      }
      return encode(p, param)
    })
    const maxTokens = checkMax(r.max_tokens ?? 16, 'max_tokens')
    const n = r.n ?? 1, seed = r.seed ?? randomInt(2 ** 31), k = r.logprobs ?? 0, wantLp = r.logprobs != null
    const stops = r.stop == null ? [] : typeof r.stop === 'string' ? [r.stop] : r.stop
    const echo = r.echo ?? false
    const promptTexts = ids.map((p) => o.tokenizer.decode(p))
    const base = (p: number[], j: number): ChoiceParams => ({
      prompt: p, maxTokens, temperature: r.temperature ?? 1, topP: r.top_p ?? 1, seed: seed + j, stops, topLogprobs: k, wantLogprobs: wantLp,
      promptLogprobs: echo && wantLp, ...(r.top_k != null ? { topK: r.top_k } : {}),
    })
    const id = reqId('cmpl'), created = now(), abort = new AbortController()
    const promptTokens = ids.reduce((a, p) => a + p.length, 0) * n
    const echoLogprobs = (p: number[], ev: readonly TokenEvent[] | undefined) => (ev ? [{ token: p[0]!, logprob: 0, top: [] }, ...ev] : [])
    if (r.stream) {
      return streamSSE(c, async (s) => {
        s.onAbort(() => abort.abort())
        let chain = Promise.resolve()
        const send = (data: unknown) => (chain = chain.then(() => s.writeSSE({ data: JSON.stringify(data) })))
        const chunk = (index: number, text: string, logprobs: unknown, finish: string | null) => send({ id, object: 'text_completion', created, model: o.name, choices: [{ index, text, logprobs, finish_reason: finish }] })
        const params = ids.flatMap((p, pi) => Array.from({ length: n }, (_, j) => {
          const index = pi * n + j
          let offset = 0
          if (echo) {
            const ev = echoLogprobs(p, undefined)
            void chunk(index, promptTexts[pi]!, wantLp ? completionLogprobs(ev, k, 0, true) : null, null)
            offset = promptTexts[pi]!.length
          }
          return { ...base(p, j), promptLogprobs: false, onDelta: (text: string, events: readonly TokenEvent[]) => {
            void chunk(index, text, wantLp ? completionLogprobs(events, k, offset, false) : null, null)
            offset += text.length
          } }
        }))
        const results = await runAll(c, params, abort)
        results.forEach((res, index) => void chunk(index, '', null, res.finish === 'cancelled' ? 'abort' : res.finish))
        if (r.stream_options?.include_usage) {
          const completion = results.reduce((a, x) => a + x.completionTokens, 0)
          void send({ id, object: 'text_completion', created, model: o.name, choices: [], usage: { prompt_tokens: promptTokens, completion_tokens: completion, total_tokens: promptTokens + completion } })
        }
        await chain
        if (!abort.signal.aborted || o.shutdown.aborted) await s.writeSSE({ data: '[DONE]' })
      })
    }
    const params = ids.flatMap((p) => Array.from({ length: n }, (_, j) => base(p, j)))
    const results = await runAll(c, params, abort)
    if (results.some((x) => x.finish === 'cancelled')) throw new ApiError(503, 'the request was cancelled: the server is shutting down', null, 'cancelled')
    const completion = results.reduce((a, x) => a + x.completionTokens, 0)
    return c.json({
      id, object: 'text_completion', created, model: o.name,
      choices: results.map((res, index) => {
        const pi = Math.floor(index / n), p = ids[pi]!
        const prefix = echo ? promptTexts[pi]! : ''
        const lp = !wantLp ? null : echo ? completionLogprobs([...echoLogprobs(p, res.promptEvents), ...res.events], k, 0, true) : completionLogprobs(res.events, k, 0, false)
        return { index, text: prefix + res.text, logprobs: lp, finish_reason: res.finish }
      }),
      usage: { prompt_tokens: promptTokens, completion_tokens: completion, total_tokens: promptTokens + completion },
    })
  })

  app.post('/v1/chat/completions', async (c) => {
    const r = await parse(c, ChatRequest)
    checkModel(r.model)
    const prompt = encode(renderChat(r.messages), 'messages')
    const asked = r.max_completion_tokens ?? r.max_tokens
    const maxTokens = asked != null ? checkMax(asked, r.max_completion_tokens != null ? 'max_completion_tokens' : 'max_tokens') : Math.min(o.maxTokensCap, seqLen - prompt.length)
    const n = r.n ?? 1, seed = r.seed ?? randomInt(2 ** 31), wantLp = r.logprobs ?? false, k = wantLp ? (r.top_logprobs ?? 0) : 0
    const stops = [CHAT_END, ...(r.stop == null ? [] : typeof r.stop === 'string' ? [r.stop] : r.stop)]
    const lpContent = (events: readonly TokenEvent[]) => events.map((e) => ({
      token: tokStr(e.token), logprob: e.logprob, bytes: [...Buffer.from(tokStr(e.token))],
      top_logprobs: e.top.map(([t, lp]) => ({ token: tokStr(t), logprob: lp, bytes: [...Buffer.from(tokStr(t))] })),
    }))
    const base = (j: number): ChoiceParams => ({ prompt, maxTokens, temperature: r.temperature ?? 1, topP: r.top_p ?? 1, seed: seed + j, stops, topLogprobs: k, wantLogprobs: wantLp, ...(r.top_k != null ? { topK: r.top_k } : {}) })
    const id = reqId('chatcmpl'), created = now(), abort = new AbortController()
    const promptTokens = prompt.length * n
    if (r.stream) {
      return streamSSE(c, async (s) => {
        s.onAbort(() => abort.abort())
        let chain = Promise.resolve()
        const send = (data: unknown) => (chain = chain.then(() => s.writeSSE({ data: JSON.stringify(data) })))
        const chunk = (index: number, delta: object, logprobs: unknown, finish: string | null) => send({ id, object: 'chat.completion.chunk', created, model: o.name, choices: [{ index, delta, logprobs, finish_reason: finish }] })
        for (let j = 0; j < n; j++) void chunk(j, { role: 'assistant', content: '' }, null, null)
        const params = Array.from({ length: n }, (_, j) => ({ ...base(j), onDelta: (text: string, events: readonly TokenEvent[]) => void chunk(j, { content: text }, wantLp ? { content: lpContent(events) } : null, null) }))
        const results = await runAll(c, params, abort)
        results.forEach((res, j) => void chunk(j, {}, null, res.finish === 'cancelled' ? 'abort' : res.finish))
        if (r.stream_options?.include_usage) {
          const completion = results.reduce((a, x) => a + x.completionTokens, 0)
          void send({ id, object: 'chat.completion.chunk', created, model: o.name, choices: [], usage: { prompt_tokens: promptTokens, completion_tokens: completion, total_tokens: promptTokens + completion } })
        }
        await chain
        if (!abort.signal.aborted || o.shutdown.aborted) await s.writeSSE({ data: '[DONE]' })
      })
    }
    const results = await runAll(c, Array.from({ length: n }, (_, j) => base(j)), abort)
    if (results.some((x) => x.finish === 'cancelled')) throw new ApiError(503, 'the request was cancelled: the server is shutting down', null, 'cancelled')
    const completion = results.reduce((a, x) => a + x.completionTokens, 0)
    return c.json({
      id, object: 'chat.completion', created, model: o.name,
      choices: results.map((res, index) => ({ index, message: { role: 'assistant', content: res.text }, logprobs: wantLp ? { content: lpContent(res.events) } : null, finish_reason: res.finish })),
      usage: { prompt_tokens: promptTokens, completion_tokens: completion, total_tokens: promptTokens + completion },
    })
  })
  return app
}
