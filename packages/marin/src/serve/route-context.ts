/**
 * @module What the API's routes share: body parsing and validation, limits (sequences per request,
 * `max_tokens`, the queue bound), running choices.
 */
import type { Context } from 'hono'
import type { ZodError } from 'zod'
import { ApiError } from './api-error.js'
import { UNSUPPORTED, describeIssue, unsupportedOption } from './api-types.js'
import type { AppOptions } from './app.js'
import { runChoice } from './choice-runner.js'
import type { ChoiceParams, ChoiceResult } from './choice-runner.js'
import type { LogitsProcessing } from './sampling.js'

export type Schema<T> = { safeParse(x: unknown): { success: true; data: T } | { success: false; error: ZodError } }

/** Helpers bound to one server's options. */
export type RouteContext = ReturnType<typeof routeContext>

export const now = () => Math.floor(Date.now() / 1000)

export function routeContext(o: AppOptions, observeTtft: (seconds: number) => void) {
  const seqLen = o.model.config.seqLen
  const tokStr = (id: number) => o.tokenizer.decode([id])
  async function parse<T>(c: Context, schema: Schema<T>): Promise<T> {
    if (o.draining())
      throw new ApiError(503, 'the server is shutting down; retry on another replica', null, 'shutting_down')
    let json: unknown
    try {
      json = JSON.parse(await c.req.text())
    } catch {
      throw new ApiError(400, 'request body is not valid JSON', null, 'invalid_json')
    }
    if (typeof json !== 'object' || json === null || Array.isArray(json))
      throw new ApiError(400, 'request body must be a JSON object', null, 'invalid_request')
    const unsupported = unsupportedOption(json as Record<string, unknown>)
    if (unsupported !== undefined)
      throw new ApiError(
        400,
        `${unsupported}: not supported by this server (${UNSUPPORTED[unsupported]}); remove it from the request`,
        unsupported,
        'unsupported_option',
      )
    const r = schema.safeParse(json)
    if (!r.success) {
      const { param, message } = describeIssue(r.error)
      throw new ApiError(400, message, param, 'invalid_value')
    }
    return r.data
  }

  function checkModel(model: string | undefined): void {
    if (model === undefined)
      throw new ApiError(
        400,
        `model: missing; name the served model, "${o.name}" (GET /v1/models lists it)`,
        'model',
        'invalid_value',
      )
    if (model !== o.name)
      throw new ApiError(
        404,
        `model "${model}" is not served here; this server serves "${o.name}"`,
        'model',
        'model_not_found',
      )
  }

  /** A prompt's ids: with the tokenizer's own special tokens around it (BOS where its post-processor adds one), or,
   * for text that already holds them as text (`hasSpecials`: a checkpoint's chat template), with those matched. */
  function encode(text: string, param: string, hasSpecials = false): number[] {
    const ids = o.tokenizer.encode(text, hasSpecials ? { specials: 'match' } : { addSpecialTokens: true })
    if (ids.length === 0)
      throw new ApiError(400, `${param}: is empty; give at least one token of text`, param, 'invalid_value')
    if (ids.length > seqLen)
      throw new ApiError(
        400,
        `${param}: ${ids.length} tokens exceed the model's context of ${seqLen}; shorten it`,
        param,
        'context_length_exceeded',
      )
    return ids
  }

  /** `logit_bias` as a map of token id → bias; every key must be a token id of the tokenizer. */
  function logitBias(bias: Readonly<Record<string, number>> | null | undefined): Map<number, number> | undefined {
    if (bias == null) return undefined
    const out = new Map<number, number>()
    for (const [k, v] of Object.entries(bias)) {
      const id = Number(k)
      if (!/^\d+$/.test(k) || id >= o.tokenizer.vocabSize)
        throw new ApiError(
          400,
          `logit_bias.${k}: not a token id; keys are token ids 0…${o.tokenizer.vocabSize - 1}`,
          `logit_bias.${k}`,
          'invalid_value',
        )
      out.set(id, v)
    }
    return out
  }

  /** The request's `logit_bias` and penalties for the engine. */
  function processingOf(r: {
    logit_bias?: Readonly<Record<string, number>> | null
    presence_penalty?: number | null
    frequency_penalty?: number | null
  }): LogitsProcessing {
    const bias = logitBias(r.logit_bias)
    return {
      ...(bias ? { logitBias: bias } : {}),
      presence: r.presence_penalty ?? 0,
      frequency: r.frequency_penalty ?? 0,
    }
  }

  function checkMax(n: number, param: string): number {
    if (n > o.maxTokensCap)
      throw new ApiError(
        400,
        `${param}: ${n} is above this server's limit of ${o.maxTokensCap}`,
        param,
        'invalid_value',
      )
    return n
  }

  /** `prompts` × `n` sequences against the per-request cap; `param` names the one to lower (`n` unless the prompts
   * alone are too many). */
  function checkSequences(prompts: number, n: number): void {
    const cap = o.maxSequencesPerRequest
    if (prompts * n <= cap) return
    const param = prompts > cap ? 'prompt' : 'n'
    throw new ApiError(
      400,
      `${param}: ${prompts} prompt(s) × n ${n} = ${prompts * n} ` +
        `sequences is above this server's limit of ${cap} per request; ` +
        `lower ${param} or split the request`,
      param,
      'invalid_value',
    )
  }

  /**
   * 429 with `Retry-After` when `count` more sequences do not fit in the engine's queue. Called
   * right before the request's choices are submitted, with no await in between (a streaming
   * route's callback runs synchronously up to its first submit), so no other request slips in.
   */
  function checkRoom(count: number): void {
    if (o.engine.hasRoom(count)) return
    const retry = o.engine.retryAfterSeconds(count)
    throw new ApiError(
      429,
      `the server's queue has no room for this request's ${count} ` +
        `sequence(s) (${o.engine.load.queued} waiting, at most ` +
        `${o.engine.maxQueued}); retry in ${retry} s`,
      null,
      'queue_full',
      { 'Retry-After': String(retry) },
    )
  }

  /** Runs every choice; aborts them all when the client goes away or the server stops. */
  async function runAll(c: Context, params: ChoiceParams[], abort: AbortController): Promise<ChoiceResult[]> {
    const onStop = () => abort.abort()
    o.shutdown.addEventListener('abort', onStop)
    c.req.raw.signal.addEventListener('abort', onStop)
    const group = {} // the request's sequences share admission turns
    try {
      const results = await Promise.all(
        params.map((p) => runChoice(o.engine, o.tokenizer, { ...p, signal: abort.signal, group })),
      )
      for (const r of results) if (r.ttftMs !== undefined) observeTtft(r.ttftMs / 1000)
      return results
    } finally {
      o.shutdown.removeEventListener('abort', onStop)
    }
  }

  return { o, seqLen, tokStr, parse, checkModel, encode, processingOf, checkMax, checkSequences, checkRoom, runAll }
}
