/** @module `POST /v1/chat/completions`: messages through the model's chat template, logprobs, SSE streaming. */
import { randomBytes, randomInt } from 'node:crypto'
import type { Hono } from 'hono'
import { streamSSE } from 'hono/streaming'
import { logger } from '@marin/rigging'
import { isMarinError } from '../errors.js'
import { ApiError } from './api-error.js'
import { ChatRequest } from './api-types.js'
import { type ChoiceParams, usageOf } from './choice-runner.js'
import type { TokenEvent } from './engine.js'
import { now } from './route-context.js'
import type { RouteContext } from './route-context.js'

const log = logger('marin')
const reqId = () => `chatcmpl-${randomBytes(12).toString('hex')}`

export function chatRoute(app: Hono, x: RouteContext): void {
  const { o, seqLen, tokStr, parse, checkModel, encode, processingOf, checkMax, checkSequences, checkRoom, runAll } = x
  app.post('/v1/chat/completions', async (c) => {
    const r = await parse(c, ChatRequest)
    checkModel(r.model)
    checkSequences(1, r.n ?? 1)
    const processing = processingOf(r)
    let rendered: string
    try {
      rendered = await o.chatTemplate.render(r.messages)
    } catch (err) {
      if (isMarinError(err, 'BAD_TEMPLATE')) {
        log.warn({ err }, 'chat template refused')
        throw new ApiError(400, `messages: ${err.message}`, 'messages', 'bad_template')
      }
      throw new ApiError(
        400,
        `messages: the model's chat template rejects them: ${(err as Error).message}`,
        'messages',
        'chat_template_error',
      )
    }
    const prompt = encode(rendered, 'messages', o.chatTemplate.writesSpecialTokens)
    const asked = r.max_completion_tokens ?? r.max_tokens
    const maxTokens =
      asked != null
        ? checkMax(asked, r.max_completion_tokens != null ? 'max_completion_tokens' : 'max_tokens')
        : Math.min(o.maxTokensCap, seqLen - prompt.length)
    const n = r.n ?? 1,
      seed = r.seed ?? randomInt(2 ** 31),
      wantLp = r.logprobs ?? false,
      k = wantLp ? (r.top_logprobs ?? 0) : 0
    const stops = [...o.chatTemplate.stops, ...(r.stop == null ? [] : typeof r.stop === 'string' ? [r.stop] : r.stop)]
    const lpContent = (events: readonly TokenEvent[]) =>
      events.map((e) => ({
        token: tokStr(e.token),
        logprob: e.logprob,
        bytes: [...Buffer.from(tokStr(e.token))],
        top_logprobs: e.top.map(([t, lp]) => ({ token: tokStr(t), logprob: lp, bytes: [...Buffer.from(tokStr(t))] })),
      }))
    const base = (j: number): ChoiceParams => ({
      prompt,
      maxTokens,
      temperature: r.temperature ?? 1,
      topP: r.top_p ?? 1,
      seed: seed + j,
      stops,
      topLogprobs: k,
      wantLogprobs: wantLp,
      ...(r.top_k != null ? { topK: r.top_k } : {}),
      processing,
    })
    const id = reqId(),
      created = now(),
      abort = new AbortController()
    const promptTokens = prompt.length * n
    checkRoom(n)
    if (r.stream) {
      return streamSSE(c, async (s) => {
        s.onAbort(() => abort.abort())
        let chain = Promise.resolve()
        const send = (data: unknown) => (chain = chain.then(() => s.writeSSE({ data: JSON.stringify(data) })))
        const chunk = (index: number, delta: object, logprobs: unknown, finish: string | null) =>
          send({
            id,
            object: 'chat.completion.chunk',
            created,
            model: o.name,
            choices: [{ index, delta, logprobs, finish_reason: finish }],
          })
        for (let j = 0; j < n; j++) void chunk(j, { role: 'assistant', content: '' }, null, null)
        const params = Array.from({ length: n }, (_, j) => ({
          ...base(j),
          onDelta: (text: string, events: readonly TokenEvent[]) =>
            void chunk(j, { content: text }, wantLp ? { content: lpContent(events) } : null, null),
        }))
        const results = await runAll(c, params, abort)
        results.forEach((res, j) => void chunk(j, {}, null, res.finish === 'cancelled' ? 'abort' : res.finish))
        if (r.stream_options?.include_usage) {
          void send({
            id,
            object: 'chat.completion.chunk',
            created,
            model: o.name,
            choices: [],
            usage: usageOf(promptTokens, results),
          })
        }
        await chain
        if (!abort.signal.aborted || o.shutdown.aborted) await s.writeSSE({ data: '[DONE]' })
      })
    }
    const results = await runAll(
      c,
      Array.from({ length: n }, (_, j) => base(j)),
      abort,
    )
    if (results.some((x) => x.finish === 'cancelled'))
      throw new ApiError(503, 'the request was cancelled: the server is shutting down', null, 'cancelled')
    return c.json({
      id,
      object: 'chat.completion',
      created,
      model: o.name,
      choices: results.map((res, index) => ({
        index,
        message: { role: 'assistant', content: res.text },
        logprobs: wantLp ? { content: lpContent(res.events) } : null,
        finish_reason: res.finish,
      })),
      usage: usageOf(promptTokens, results),
    })
  })
}
