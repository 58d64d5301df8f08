/**
 * @module The continuous-batching engine. Requests queue; each scheduler step runs at most one
 * prefill pass of at most `maxPrefillTokens` prompt tokens, then advances every active sequence by
 * one token in a single batched forward pass (`decodeStepFast`: levanter's `decodeStep`, as one
 * native call where the model runs it). The prefill pass either admits waiting requests into free
 * slots (their prompts prefilled together, so a burst of prompts is prefilled over several steps),
 * or takes the next chunk of a prompt longer than the budget: such a prompt is prefilled
 * `maxPrefillTokens` tokens at a time into a cache of its own (levanter's `prefillChunk`) and joins
 * the batch after its last chunk, so it never stalls the running sequences for more than one chunk;
 * while it is prefilled, its chunks and admissions of waiting
 * prompts take turns. A request that arrives mid-generation joins at the next step instead of
 * waiting for the others to finish. Logits are read asynchronously (any backend).
 *
 * Admission is fair between groups (one HTTP request's prompts × n form a group): a free slot goes
 * to the waiting group with the fewest running sequences, round-robin on ties, so a small request
 * waits for the next sequence to finish, not behind every sequence of a large one queued before it.
 */
import {
  BatchCache,
  Rng,
  decodeStepFast,
  logSoftmax,
  prefill,
  prefillChunk,
  prepareDecodeWeights,
  sampleToken,
  topLogprobs,
} from '@marin/levanter'
import type { CausalLM, DecodeWeights } from '@marin/levanter'
import type { MetricsRegistry } from '@marin/rigging'
import { applyLogitsProcessing, processes } from './sampling.js'
import type { LogitsProcessing } from './sampling.js'

/** One generated (or, for the prompt, scored) token. */
export type TokenEvent = { readonly token: number; readonly logprob: number; readonly top: readonly [number, number][] }

/** What a caller asks the engine for. */
export type SequenceRequest = {
  readonly prompt: readonly number[]
  readonly maxTokens: number
  /** 0 is greedy. */
  readonly temperature: number
  readonly topP: number
  readonly topK?: number
  /** `logit_bias` and the penalties; the reported log-probabilities stay the model's own. */
  readonly processing?: LogitsProcessing
  readonly seed: number
  /** How many alternatives to report per token (0: none). */
  readonly topLogprobs: number
  /** Also score the prompt tokens (OpenAI `echo` with `logprobs`). */
  readonly promptLogprobs?: boolean
  readonly signal?: AbortSignal
  /** Sequences with the same group (one request's prompts × n) share turns at admission. @default the sequence alone */
  readonly group?: object
  /** Called for each new token; return true to stop (a stop string matched). */
  readonly onToken: (e: TokenEvent) => unknown
}

export type FinishReason = 'stop' | 'length' | 'cancelled'

export type SequenceResult = {
  readonly finish: FinishReason
  /** log p of each prompt token after the first, when asked for. */
  readonly promptLogprobs?: readonly TokenEvent[]
  readonly completionTokens: number
}

type Active = {
  readonly req: SequenceRequest
  readonly group: object
  /** performance.now() at admission. */
  admittedAt: number
  readonly rng: Rng
  position: number
  last: number
  generated: number
  /** How often each token was generated, kept only when the penalties need it. */
  readonly counts: Map<number, number>
  readonly done: (r: SequenceResult) => void
  readonly fail: (e: unknown) => void
  promptLogprobs?: TokenEvent[]
}

/** What one forward pass of the engine did (`EngineOptions.onStep`): a prefill of whole prompts, a chunk of a long
 * prompt, or a decode step over the running batch. */
export type EngineStep =
  | { readonly kind: 'prefill'; readonly sequences: number; readonly tokens: number }
  | { readonly kind: 'prefill-chunk'; readonly offset: number; readonly tokens: number; readonly promptTokens: number }
  | { readonly kind: 'decode'; readonly rows: number }

/** Prompt tokens prefilled per scheduler step by default: the chunk size of long prompts. */
export const DEFAULT_MAX_PREFILL_TOKENS = 256

/** A sequence whose prompt is prefilled a chunk per step, in a cache of its own until its last chunk. */
type Chunking = { readonly s: Active; readonly cache: BatchCache; done: number }

export type EngineOptions = {
  /** Sequences decoded together at most; more requests wait in the queue. @default 16 */
  readonly maxBatch?: number
  /** Sequences that may wait for a slot; `hasRoom` says whether more fit. @default unbounded */
  readonly maxQueued?: number
  readonly metrics?: MetricsRegistry
  /** Only ids below this are ever sampled (models often pad their vocabulary past the tokenizer's). @default the
   * model's vocabulary size */
  readonly vocabLimit?: number
  /** Prompt tokens prefilled per scheduler step at most: whole prompts together up to it, a longer prompt in chunks
   * of this many tokens with decode steps in between. @default {@link DEFAULT_MAX_PREFILL_TOKENS} */
  readonly maxPrefillTokens?: number
  /** Called after each forward pass (scheduling is observable without timing it). */
  readonly onStep?: (e: EngineStep) => void
  /** The weights the decode steps read: the model's float32 tensors, or bf16 copies converted once at start (half
   * the bytes a step reads; levanter's `prepareDecodeWeights` throws BAD_CONFIG naming why where they cannot run).
   * @default 'fp32' */
  readonly weights?: DecodeWeights
}

/** Runs generation requests against one model with continuous batching. */
export class Engine {
  private readonly queue: Active[] = []
  /** Running sequences, in the order of the cache's rows. */
  private readonly active: Active[] = []
  private readonly cache = new BatchCache()
  /** The sequence whose long prompt is being prefilled, if any (it holds a slot). */
  private chunking: Chunking | undefined
  /** Whether the chunked prompt has the next prefill pass (after an admission in its midst, until its next chunk). */
  private chunkTurn = false
  /** Sequences whose one-pass prefill is running (out of the queue, not yet in the batch). */
  private admitting: Active[] = []
  private running = false
  /** When each group last had a sequence admitted (a running count of admissions). */
  private readonly lastTurn = new WeakMap<object, number>()
  private turn = 0
  private idle: (() => void)[] = []
  readonly maxBatch: number
  readonly maxQueued: number
  readonly maxPrefillTokens: number
  /** Mean time a sequence runs, admission to finish (exponentially weighted), ms; undefined before the first. */
  private meanRunMs: number | undefined
  private readonly vocabLimit: number
  /** The log-softmax row `take` reuses (a fresh 400 KB array per row and step at V 50257 cost the collector). */
  private lp: Float64Array<ArrayBuffer> | undefined
  private readonly onStep: ((e: EngineStep) => void) | undefined
  private readonly weights: DecodeWeights
  private readonly m

  constructor(
    readonly model: CausalLM,
    opts: EngineOptions = {},
  ) {
    this.maxBatch = opts.maxBatch ?? 16
    this.maxQueued = opts.maxQueued ?? Infinity
    this.maxPrefillTokens = opts.maxPrefillTokens ?? DEFAULT_MAX_PREFILL_TOKENS
    this.onStep = opts.onStep
    this.weights = opts.weights ?? 'fp32'
    prepareDecodeWeights(model, this.weights)
    this.vocabLimit = Math.min(opts.vocabLimit ?? model.config.vocabSize, model.config.vocabSize)
    const reg = opts.metrics
    this.m = reg && {
      tokens: reg.counter('marin_serve_generated_tokens_total', { help: 'tokens generated' }),
      prompt: reg.counter('marin_serve_prompt_tokens_total', { help: 'prompt tokens prefilled' }),
      chunks: reg.counter('marin_serve_prefill_chunks_total', { help: 'chunks of long prompts prefilled' }),
      steps: reg.counter('marin_serve_decode_steps_total', { help: 'batched decode forward passes' }),
      batch: reg.histogram('marin_serve_batch_size', {
        help: 'sequences per decode step',
        buckets: [1, 2, 4, 8, 16, 32, 64],
      }),
      active: reg.gauge('marin_serve_active_sequences', { help: 'sequences in the running batch' }),
      queued: reg.gauge('marin_serve_queued_sequences', { help: 'sequences waiting for a slot' }),
    }
  }

  /** Sequences running and waiting. */
  get load(): { active: number; queued: number } {
    return { active: this.active.length + (this.chunking ? 1 : 0), queued: this.queue.length }
  }

  /** Whether `count` more sequences fit in the queue (`maxQueued`) now. */
  hasRoom(count: number): boolean {
    return this.queue.length + count <= this.maxQueued
  }

  /**
   * About how many seconds until `count` more sequences fit in the queue: the overflow admitted
   * `maxBatch` at a time, each round taking a sequence's mean run time (1 s before any finished);
   * at least 1, at most 60.
   */
  retryAfterSeconds(count: number): number {
    const over = Math.max(1, this.queue.length + count - this.maxQueued)
    const s = Math.ceil((Math.ceil(over / this.maxBatch) * (this.meanRunMs ?? 1000)) / 1000)
    return Math.min(60, Math.max(1, s))
  }

  /** Generate for one request; resolves when it stops, reaches `maxTokens` or the context, or is cancelled. */
  submit(req: SequenceRequest): Promise<SequenceResult> {
    return new Promise((done, fail) => {
      this.queue.push({
        req,
        group: req.group ?? {},
        admittedAt: 0,
        rng: new Rng(req.seed),
        position: 0,
        last: 0,
        generated: 0,
        counts: new Map(),
        done,
        fail,
      })
      this.kick()
    })
  }

  /** Resolves once nothing is running or waiting. */
  whenIdle(): Promise<void> {
    if (!this.running) return Promise.resolve()
    return new Promise((r) => this.idle.push(r))
  }

  /** Cancel every running and waiting sequence (they finish with 'cancelled'). */
  cancelAll(): void {
    this.cache.dispose()
    const admitting = this.admitting
    this.admitting = []
    for (const s of [...this.queue.splice(0), ...this.active.splice(0), ...admitting, ...this.dropChunking()])
      this.finish(s, 'cancelled')
  }

  /** Give up the prompt being prefilled in chunks (its cache freed); returns its sequence. */
  private dropChunking(): Active[] {
    const c = this.chunking
    if (!c) return []
    this.chunking = undefined
    c.cache.dispose()
    return [c.s]
  }

  private kick(): void {
    if (this.running) return
    this.running = true
    setImmediate(() => void this.loop())
  }

  private async loop(): Promise<void> {
    try {
      while (this.queue.length > 0 || this.active.length > 0 || this.chunking) {
        this.dropCancelled()
        const free = this.maxBatch - this.active.length - (this.chunking ? 1 : 0)
        // While a long prompt is prefilled in chunks, passes alternate between its chunks and admitting waiting
        // prompts that fit one pass.
        const chunkFirst = this.chunking !== undefined && this.chunkTurn
        const admit = !chunkFirst && this.queue.length > 0 && free > 0 ? this.pick(free, !this.chunking) : []
        if (admit.length > 0 || this.chunking) {
          if (admit.length > 0) await this.admit(admit)
          else await this.nextChunk()
          // Flush the first tokens before the next forward pass: time to first token.
          await new Promise((r) => setImmediate(r))
          this.dropCancelled()
        }
        this.m?.queued.set(this.queue.length)
        this.m?.active.set(this.active.length)
        if (this.active.length > 0) await this.step()
        // Let the event loop deliver new requests, stream bytes and notice disconnects.
        await new Promise((r) => setImmediate(r))
      }
    } catch (err) {
      // A failed forward pass fails every sequence in flight rather than leaving them hanging.
      this.cache.dispose()
      const admitting = this.admitting
      this.admitting = []
      for (const s of [...this.queue.splice(0), ...this.active.splice(0), ...admitting, ...this.dropChunking()])
        s.fail(err)
    } finally {
      this.running = false
      this.m?.active.set(0)
      for (const r of this.idle.splice(0)) r()
    }
  }

  private dropCancelled(): void {
    for (let i = this.queue.length - 1; i >= 0; i--) {
      const s = this.queue[i]!
      if (s.req.signal?.aborted) {
        this.queue.splice(i, 1)
        this.finish(s, 'cancelled')
      }
    }
    if (this.chunking?.s.req.signal?.aborted) for (const s of this.dropChunking()) this.finish(s, 'cancelled')
    const gone = this.active.filter((s) => s.req.signal?.aborted)
    if (gone.length > 0) {
      this.remove(gone)
      for (const s of gone) this.finish(s, 'cancelled')
    }
  }

  /**
   * Take up to `free` sequences off the queue, one at a time to the group with the fewest running
   * (and already picked) sequences; among those, the group whose last turn is oldest (never first,
   * then the one queued earliest): round-robin. Each group's own sequences go in order. Stops
   * before the prompt tokens picked would pass `maxPrefillTokens` (the first is always taken). Without `long`, a group
   * whose next prompt is longer than `maxPrefillTokens` is passed over (one prompt is prefilled in chunks at a time).
   */
  private pick(free: number, long: boolean): Active[] {
    const held = new Map<object, number>()
    for (const s of [...this.active, ...(this.chunking ? [this.chunking.s] : [])])
      held.set(s.group, (held.get(s.group) ?? 0) + 1)
    const picked: Active[] = []
    let tokens = 0
    while (picked.length < free && this.queue.length > 0) {
      let best = -1,
        bestHeld = Infinity,
        bestTurn = Infinity
      const seen = new Set<object>()
      this.queue.forEach((s, i) => {
        if (seen.has(s.group)) return
        seen.add(s.group)
        if (!long && s.req.prompt.length > this.maxPrefillTokens) return
        const h = held.get(s.group) ?? 0,
          t = this.lastTurn.get(s.group) ?? -1
        if (h < bestHeld || (h === bestHeld && t < bestTurn)) [best, bestHeld, bestTurn] = [i, h, t]
      })
      if (best < 0) break
      const cost = this.queue[best]!.req.prompt.length
      if (picked.length > 0 && tokens + cost > this.maxPrefillTokens) break
      tokens += cost
      const [s] = this.queue.splice(best, 1)
      held.set(s!.group, bestHeld + 1)
      this.lastTurn.set(s!.group, this.turn++)
      picked.push(s!)
    }
    return picked
  }

  /**
   * Prefill the prompts of `joining` in one forward pass, add them to the batch, sample their first tokens; a prompt
   * longer than `maxPrefillTokens` (picked alone) starts its chunks instead.
   */
  private async admit(joining: Active[]): Promise<void> {
    const V = this.model.config.vocabSize
    if (joining.length === 1 && joining[0]!.req.prompt.length > this.maxPrefillTokens) {
      const s = joining[0]!
      if (s.req.promptLogprobs) s.promptLogprobs = []
      this.chunking = { s, cache: new BatchCache(), done: 0 }
      return this.nextChunk()
    }
    const all = joining.some((s) => s.req.promptLogprobs)
    let out: Awaited<ReturnType<typeof prefill>>
    this.admitting = joining
    try {
      out = await prefill(
        this.model,
        joining.map((s) => s.req.prompt),
        all,
      )
    } catch (err) {
      this.admitting = []
      for (const s of joining) s.fail(err)
      return
    }
    const lengths = joining.map((s) => s.req.prompt.length)
    if (this.admitting !== joining) {
      // cancelled (and finished) while the pass ran: drop the keys/values
      const dropped = new BatchCache()
      dropped.add(out.kv, lengths)
      dropped.dispose()
      return
    }
    this.admitting = []
    this.chunkTurn = true
    this.onStep?.({
      kind: 'prefill',
      sequences: joining.length,
      tokens: joining.reduce((n, s) => n + s.req.prompt.length, 0),
    })
    this.cache.add(out.kv, lengths) // the batch cache owns the tensors now
    joining.forEach((s, r) => {
      const T = s.req.prompt.length,
        rows = out.logits[r]!
      if (s.req.promptLogprobs) {
        s.promptLogprobs = []
        this.scorePrompt(s, rows, 0, T - 1)
      }
    })
    this.joined(
      joining,
      joining.map((s, r) => {
        const T = s.req.prompt.length
        return all ? out.logits[r]!.subarray((T - 1) * V, T * V) : out.logits[r]!
      }),
    )
  }

  /** The next chunk of the prompt being prefilled in chunks; after the last, its sequence joins the batch. */
  private async nextChunk(): Promise<void> {
    const c = this.chunking!
    const { s } = c,
      prompt = s.req.prompt,
      V = this.model.config.vocabSize
    const n = Math.min(this.maxPrefillTokens, prompt.length - c.done)
    const all = s.req.promptLogprobs === true
    let logits: Float32Array
    try {
      logits = (await prefillChunk(this.model, c.cache, [prompt.slice(c.done, c.done + n)], all))[0]!
    } catch (err) {
      this.dropChunking()
      s.fail(err)
      return
    }
    if (this.chunking !== c) return // cancelled while the pass ran
    this.chunkTurn = false
    const offset = c.done
    c.done += n
    this.m?.chunks.inc()
    this.onStep?.({ kind: 'prefill-chunk', offset, tokens: n, promptTokens: prompt.length })
    // position offset+j predicts prompt token offset+j+1
    if (all) this.scorePrompt(s, logits, offset, Math.min(n, prompt.length - 1 - offset))
    if (c.done < prompt.length) return
    this.chunking = undefined
    this.cache.absorb(c.cache)
    this.joined([s], [all ? logits.subarray((n - 1) * V, n * V) : logits])
  }

  /** Log-probs of the prompt tokens after positions offset…offset+count-1, from their logits `rows` (from offset). */
  private scorePrompt(s: Active, rows: Float32Array, offset: number, count: number): void {
    const V = this.model.config.vocabSize,
      { req } = s
    for (let j = 0; j < count; j++) {
      const token = req.prompt[offset + j + 1]!
      const lp = logSoftmax(rows.subarray(j * V, (j + 1) * V))
      s.promptLogprobs!.push({ token, logprob: lp[token]!, top: topLogprobs(lp, req.topLogprobs) })
    }
  }

  /** Sequences whose prompts are in the batch cache now (its last rows) start: each samples its first token from
   * `last`, its prompt's last logits. */
  private joined(joining: Active[], last: Float32Array[]): void {
    this.active.push(...joining)
    const t = performance.now()
    joining.forEach((s, r) => {
      s.admittedAt = t
      s.position = s.req.prompt.length
      this.m?.prompt.inc(s.req.prompt.length)
      // a prompt that fills the context leaves no room for a token (see `take`)
      if (s.req.maxTokens <= 0 || s.position >= this.model.config.seqLen) this.end(s, 'length')
      else this.take(s, last[r]!)
    })
  }

  /** Sample from one row of logits, report it, and decide whether the sequence goes on. */
  private lpRow(n: number): Float64Array<ArrayBuffer> {
    if (this.lp?.length !== n) this.lp = new Float64Array(n)
    return this.lp
  }

  private take(s: Active, raw: Float32Array): void {
    const { req } = s
    // only ids below vocabLimit are ever sampled or reported: the row's first vocabLimit logits (the ids past it
    // would have probability 0: leaving them out changes no value, and skips their copy, fill and exps)
    const logits = this.vocabLimit < raw.length ? raw.subarray(0, this.vocabLimit) : raw
    const p = req.processing
    const processed = p && processes(p) ? applyLogitsProcessing(logits, p, s.counts) : undefined
    // the model's own log-probabilities (reported); at temperature 1 without processing, also what is sampled from
    const lp = logSoftmax(logits, this.lpRow(logits.length))
    const token = sampleToken(
      processed ?? logits,
      { temperature: req.temperature, topP: req.topP, ...(req.topK !== undefined ? { topK: req.topK } : {}) },
      s.rng,
      processed ? undefined : lp,
    )
    s.last = token
    s.generated++
    if (p && (p.presence || p.frequency)) s.counts.set(token, (s.counts.get(token) ?? 0) + 1)
    this.m?.tokens.inc()
    let stop: unknown
    try {
      stop = req.onToken({ token, logprob: lp[token]!, top: topLogprobs(lp, req.topLogprobs) })
    } catch (err) {
      this.remove([s])
      s.fail(err)
      return
    }
    if (stop === true) this.end(s, 'stop')
    // Prompt and completion together fit the context (at most seqLen − prompt tokens, as vLLM's max_model_len and
    // levanter's generate count): the whole text can be fed back as a prompt.
    else if (s.generated >= req.maxTokens || req.prompt.length + s.generated >= this.model.config.seqLen)
      this.end(s, 'length')
  }

  private async step(): Promise<void> {
    const batch = [...this.active]
    this.m?.steps.inc()
    this.m?.batch.observe(batch.length)
    // one native call where the model runs it (levanter's decodeStepFast; the same logits as decodeStep)
    const logits = await decodeStepFast(
      this.model,
      this.cache,
      batch.map((s) => s.last),
      { weights: this.weights },
    )
    this.onStep?.({ kind: 'decode', rows: batch.length })
    const V = this.model.config.vocabSize
    for (const s of batch) s.position++
    batch.forEach((s, b) => {
      if (this.active.includes(s)) this.take(s, logits.subarray(b * V, (b + 1) * V))
    })
  }

  /** Take sequences out of the running batch and their rows out of the cache. */
  private remove(gone: readonly Active[]): void {
    const keep: number[] = []
    this.active.forEach((s, i) => {
      if (!gone.includes(s)) keep.push(i)
    })
    if (keep.length === this.active.length) return
    this.cache.keep(keep)
    const kept = keep.map((i) => this.active[i]!)
    this.active.splice(0, this.active.length, ...kept)
  }

  private end(s: Active, finish: FinishReason): void {
    this.remove([s])
    const ran = performance.now() - s.admittedAt
    this.meanRunMs = this.meanRunMs === undefined ? ran : 0.8 * this.meanRunMs + 0.2 * ran
    this.finish(s, finish)
  }

  private finish(s: Active, finish: FinishReason): void {
    s.done({ finish, completionTokens: s.generated, ...(s.promptLogprobs ? { promptLogprobs: s.promptLogprobs } : {}) })
  }
}
