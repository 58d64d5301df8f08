/**
 * @module One choice of a completion: encode → engine → text with stop strings, collecting the
 * per-token log-probabilities both endpoints report. Streaming callers get each delta as it is safe.
 */
import type { BpeTokenizer } from '@marin/datakit'
import type { Engine, FinishReason, TokenEvent } from './engine.js'
import type { LogitsProcessing } from './sampling.js'
import { TextStream } from './text-stream.js'

export type ChoiceParams = {
  readonly prompt: readonly number[]
  readonly maxTokens: number
  readonly temperature: number
  readonly topP: number
  readonly topK?: number
  readonly processing?: LogitsProcessing
  readonly seed: number
  readonly stops: readonly string[]
  readonly topLogprobs: number
  readonly wantLogprobs: boolean
  readonly promptLogprobs?: boolean
  readonly signal?: AbortSignal
  /** Sequences of one request share admission turns (see `SequenceRequest.group`). */
  readonly group?: object
  /** Streaming: text that became safe to show and the tokens generated since the last call. */
  readonly onDelta?: (text: string, events: readonly TokenEvent[]) => void
}

export type ChoiceResult = {
  readonly text: string
  readonly finish: FinishReason
  readonly events: readonly TokenEvent[]
  readonly promptEvents?: readonly TokenEvent[]
  readonly completionTokens: number
  /** Time from submit to the first token, ms. */
  readonly ttftMs: number | undefined
}

export async function runChoice(engine: Engine, tokenizer: BpeTokenizer, p: ChoiceParams): Promise<ChoiceResult> {
  const text = new TextStream(tokenizer, p.stops, p.prompt)
  const events: TokenEvent[] = []
  const t0 = performance.now()
  let ttftMs: number | undefined
  let sent = 0
  const r = await engine.submit({
    prompt: p.prompt,
    maxTokens: p.maxTokens,
    temperature: p.temperature,
    topP: p.topP,
    seed: p.seed,
    ...(p.topK !== undefined ? { topK: p.topK } : {}),
    ...(p.processing ? { processing: p.processing } : {}),
    topLogprobs: p.topLogprobs,
    promptLogprobs: p.promptLogprobs ?? false,
    ...(p.signal ? { signal: p.signal } : {}),
    ...(p.group ? { group: p.group } : {}),
    onToken: (e) => {
      ttftMs ??= performance.now() - t0
      events.push(e)
      const { delta, stopped } = text.push(e.token)
      if (p.onDelta && (delta !== '' || p.wantLogprobs)) {
        p.onDelta(delta, events.slice(sent))
        sent = events.length
      }
      return stopped
    },
  })
  if (p.onDelta) {
    const rest = text.flush()
    if (rest !== '' || sent < events.length) p.onDelta(rest, events.slice(sent))
  }
  return {
    text: text.text(),
    finish: r.finish,
    events,
    completionTokens: r.completionTokens,
    ttftMs,
    ...(r.promptLogprobs ? { promptEvents: r.promptLogprobs } : {}),
  }
}

/** OpenAI's `usage` for one request: its prompt tokens and what its choices generated. */
export function usageOf(promptTokens: number, results: readonly Pick<ChoiceResult, 'completionTokens'>[]) {
  const completion = results.reduce((a, x) => a + x.completionTokens, 0)
  return { prompt_tokens: promptTokens, completion_tokens: completion, total_tokens: promptTokens + completion }
}
