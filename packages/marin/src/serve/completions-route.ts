/** @module `POST /v1/completions`: prompt strings or token ids, n choices each, echo + logprobs (as lm-eval-harness
 * reads them), SSE streaming. */
import { randomBytes, randomInt } from 'node:crypto'
import type { Hono } from 'hono'
import { streamSSE } from 'hono/streaming'
import { ApiError } from './api-error.js'
import { CompletionRequest } from './api-types.js'
import { type ChoiceParams, usageOf } from './choice-runner.js'
import type { TokenEvent } from './engine.js'
import { now } from './route-context.js'
import type { RouteContext } from './route-context.js'

const reqId = () => `cmpl-${randomBytes(12).toString('hex')}`

export function completionsRoute(app: Hono, x: RouteContext): void {
  const { o, seqLen, tokStr, parse, checkModel, encode, processingOf, checkMax, checkSequences, checkRoom, runAll } = x
  const completionLogprobs = (events: readonly TokenEvent[], k: number, offset0: number, firstNull: boolean) => {
    let off = offset0
    return {
      tokens: events.map((e) => tokStr(e.token)),
      token_logprobs: events.map((e, i) => (firstNull && i === 0 ? null : e.logprob)),
      top_logprobs: events.map((e, i) =>
        firstNull && i === 0 ? null : Object.fromEntries(e.top.slice(0, k).map(([id, lp]) => [tokStr(id), lp])),
      ),
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
    const prompts =
      typeof r.prompt === 'string'
        ? [r.prompt]
        : r.prompt.every((x) => typeof x === 'number')
          ? [r.prompt as number[]]
          : (r.prompt as string[])
    checkSequences(prompts.length, r.n ?? 1)
    const processing = processingOf(r)
    const ids = prompts.map((p, i) => {
      const param = typeof r.prompt === 'string' ? 'prompt' : `prompt.${i}`
      if (typeof p !== 'string') {
        if (p.length > seqLen)
          throw new ApiError(
            400,
            `prompt: ${p.length} tokens exceed the model's context of ${seqLen}; shorten it`,
            'prompt',
            'context_length_exceeded',
          )
        // ids the tokenizer lacks cannot be decoded for the response, even where the model pads its vocabulary
        const vocab = Math.min(o.model.config.vocabSize, o.tokenizer.vocabSize)
        if (p.some((t) => t >= vocab))
          throw new ApiError(
            400,
            `prompt: token ids must be below ${vocab}, the vocabulary size`,
            'prompt',
            'invalid_value',
          )
        return p
      }
      return encode(p, param)
    })
    const maxTokens = checkMax(r.max_tokens ?? 16, 'max_tokens')
    const n = r.n ?? 1,
      seed = r.seed ?? randomInt(2 ** 31),
      k = r.logprobs ?? 0,
      wantLp = r.logprobs != null
    const stops = r.stop == null ? [] : typeof r.stop === 'string' ? [r.stop] : r.stop
    const echo = r.echo ?? false
    const promptTexts = ids.map((p) => o.tokenizer.decode(p))
    const base = (p: number[], j: number): ChoiceParams => ({
      prompt: p,
      maxTokens,
      temperature: r.temperature ?? 1,
      topP: r.top_p ?? 1,
      seed: seed + j,
      stops,
      topLogprobs: k,
      wantLogprobs: wantLp,
      promptLogprobs: echo && wantLp,
      ...(r.top_k != null ? { topK: r.top_k } : {}),
      processing,
    })
    const id = reqId(),
      created = now(),
      abort = new AbortController()
    const promptTokens = ids.reduce((a, p) => a + p.length, 0) * n
    const echoLogprobs = (p: number[], ev: readonly TokenEvent[] | undefined) =>
      ev ? [{ token: p[0]!, logprob: 0, top: [] }, ...ev] : []
    checkRoom(ids.length * n)
    if (r.stream) {
      return streamSSE(c, async (s) => {
        s.onAbort(() => abort.abort())
        let chain = Promise.resolve()
        const send = (data: unknown) => (chain = chain.then(() => s.writeSSE({ data: JSON.stringify(data) })))
        const chunk = (index: number, text: string, logprobs: unknown, finish: string | null) =>
          send({
            id,
            object: 'text_completion',
            created,
            model: o.name,
            choices: [{ index, text, logprobs, finish_reason: finish }],
          })
        const params = ids.flatMap((p, pi) =>
          Array.from({ length: n }, (_, j) => {
            const index = pi * n + j
            let offset = 0
            if (echo) {
              const ev = echoLogprobs(p, undefined)
              void chunk(index, promptTexts[pi]!, wantLp ? completionLogprobs(ev, k, 0, true) : null, null)
              offset = promptTexts[pi]!.length
            }
            return {
              ...base(p, j),
              promptLogprobs: false,
              onDelta: (text: string, events: readonly TokenEvent[]) => {
                void chunk(index, text, wantLp ? completionLogprobs(events, k, offset, false) : null, null)
                offset += text.length
              },
            }
          }),
        )
        const results = await runAll(c, params, abort)
        results.forEach((res, index) => void chunk(index, '', null, res.finish === 'cancelled' ? 'abort' : res.finish))
        if (r.stream_options?.include_usage) {
          void send({
            id,
            object: 'text_completion',
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
    const params = ids.flatMap((p) => Array.from({ length: n }, (_, j) => base(p, j)))
    const results = await runAll(c, params, abort)
    if (results.some((x) => x.finish === 'cancelled'))
      throw new ApiError(503, 'the request was cancelled: the server is shutting down', null, 'cancelled')
    return c.json({
      id,
      object: 'text_completion',
      created,
      model: o.name,
      choices: results.map((res, index) => {
        const pi = Math.floor(index / n),
          p = ids[pi]!
        const prefix = echo ? promptTexts[pi]! : ''
        const lp = !wantLp
          ? null
          : echo
            ? completionLogprobs([...echoLogprobs(p, res.promptEvents), ...res.events], k, 0, true)
            : completionLogprobs(res.events, k, 0, false)
        return { index, text: prefix + res.text, logprobs: lp, finish_reason: res.finish }
      }),
      usage: usageOf(promptTokens, results),
    })
  })
}
