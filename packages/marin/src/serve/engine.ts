/**
 * @module The continuous-batching engine. Requests queue; each scheduler step admits waiting
 * requests into free slots (their prompts prefilled together in one forward pass, at most
 * `maxPrefillTokens` prompt tokens per step, so a burst of prompts is prefilled over several
 * steps instead of stalling the running sequences), then advances every active sequence by one
 * token in a single batched forward pass (`decodeStep`). A request that arrives mid-generation
 * joins at the next step instead of waiting for the others to finish.
 *
 * Admission is fair between groups (one HTTP request's prompts × n form a group): a free slot goes
 * to the waiting group with the fewest running sequences, round-robin on ties, so a small request
 * waits for the next sequence to finish, not behind every sequence of a large one queued before it.
 */
import { BatchCache, Rng, decodeStep, prefill } from '@marin/levanter'
import type { CausalLM } from '@marin/levanter'
import type { MetricsRegistry } from '@marin/rigging'
import { applyLogitsProcessing, logSoftmax, processes, sampleNext, topLogprobs } from './sampling.js'
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

export type EngineOptions = {
  /** Sequences decoded together at most; more requests wait in the queue. @default 16 */
  readonly maxBatch?: number
  /** Sequences that may wait for a slot; `hasRoom` says whether more fit. @default unbounded */
  readonly maxQueued?: number
  readonly metrics?: MetricsRegistry
  /** Only ids below this are ever sampled (models often pad their vocabulary past the tokenizer's). @default the
   * model's vocabulary size */
  readonly vocabLimit?: number
  /** Prompt tokens prefilled per scheduler step at most (a longer prompt is admitted alone). @default 512 */
  readonly maxPrefillTokens?: number
}

/** Runs generation requests against one model with continuous batching. */
export class Engine {
  private readonly queue: Active[] = []
  /** Running sequences, in the order of the cache's rows. */
  private readonly active: Active[] = []
  private readonly cache = new BatchCache()
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
  private readonly m

  constructor(
    readonly model: CausalLM,
    opts: EngineOptions = {},
  ) {
    this.maxBatch = opts.maxBatch ?? 16
    this.maxQueued = opts.maxQueued ?? Infinity
    this.maxPrefillTokens = opts.maxPrefillTokens ?? 512
    this.vocabLimit = Math.min(opts.vocabLimit ?? model.config.vocabSize, model.config.vocabSize)
    const reg = opts.metrics
    this.m = reg && {
      tokens: reg.counter('marin_serve_generated_tokens_total', { help: 'tokens generated' }),
      prompt: reg.counter('marin_serve_prompt_tokens_total', { help: 'prompt tokens prefilled' }),
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
    return { active: this.active.length, queued: this.queue.length }
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
    for (const s of [...this.queue.splice(0), ...this.active.splice(0)]) this.finish(s, 'cancelled')
  }

  private kick(): void {
    if (this.running) return
    this.running = true
    setImmediate(() => void this.loop())
  }

  private async loop(): Promise<void> {
    try {
      while (this.queue.length > 0 || this.active.length > 0) {
        this.dropCancelled()
        const free = this.maxBatch - this.active.length
        if (this.queue.length > 0 && free > 0) {
          this.admit(this.pick(free))
          // Flush the first tokens before the next forward pass: time to first token.
          await new Promise((r) => setImmediate(r))
          this.dropCancelled()
        }
        this.m?.queued.set(this.queue.length)
        this.m?.active.set(this.active.length)
        if (this.active.length > 0) this.step()
        // Let the event loop deliver new requests, stream bytes and notice disconnects.
        await new Promise((r) => setImmediate(r))
      }
    } catch (err) {
      // A failed forward pass fails every sequence in flight rather than leaving them hanging.
      this.cache.dispose()
      for (const s of [...this.queue.splice(0), ...this.active.splice(0)]) s.fail(err)
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
   * before the prompt tokens picked would pass `maxPrefillTokens` (the first is always taken).
   */
  private pick(free: number): Active[] {
    const held = new Map<object, number>()
    for (const s of this.active) held.set(s.group, (held.get(s.group) ?? 0) + 1)
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
        const h = held.get(s.group) ?? 0,
          t = this.lastTurn.get(s.group) ?? -1
        if (h < bestHeld || (h === bestHeld && t < bestTurn)) [best, bestHeld, bestTurn] = [i, h, t]
      })
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

  /** Prefill the prompts of `joining` in one forward pass, add them to the batch, sample their first tokens. */
  private admit(joining: Active[]): void {
    const V = this.model.config.vocabSize
    const all = joining.some((s) => s.req.promptLogprobs)
    let out: ReturnType<typeof prefill>
    try {
      out = prefill(
        this.model,
        joining.map((s) => s.req.prompt),
        all,
      )
    } catch (err) {
      for (const s of joining) s.fail(err)
      return
    }
    this.cache.add(
      out.kv,
      joining.map((s) => s.req.prompt.length),
    ) // the batch cache owns the tensors now
    this.active.push(...joining)
    const t = performance.now()
    for (const s of joining) s.admittedAt = t
    joining.forEach((s, r) => {
      const { req } = s,
        T = req.prompt.length,
        rows = out.logits[r]!
      s.position = T
      this.m?.prompt.inc(T)
      if (req.promptLogprobs) {
        s.promptLogprobs = []
        for (let t = 1; t < T; t++) {
          const lp = logSoftmax(rows.subarray((t - 1) * V, t * V))
          s.promptLogprobs.push({
            token: req.prompt[t]!,
            logprob: lp[req.prompt[t]!]!,
            top: topLogprobs(lp, req.topLogprobs),
          })
        }
      }
      if (req.maxTokens <= 0) this.end(s, 'length')
      else this.take(s, all ? rows.subarray((T - 1) * V, T * V) : rows)
    })
  }

  /** Sample from one row of logits, report it, and decide whether the sequence goes on. */
  private take(s: Active, raw: Float32Array): void {
    const { req } = s
    const logits = this.vocabLimit < raw.length ? raw.slice() : raw
    if (logits !== raw) logits.fill(-Infinity, this.vocabLimit)
    const p = req.processing
    const token = sampleNext(
      p && processes(p) ? applyLogitsProcessing(logits, p, s.counts) : logits,
      { temperature: req.temperature, topP: req.topP, ...(req.topK !== undefined ? { topK: req.topK } : {}) },
      s.rng,
    )
    const lp = logSoftmax(logits)
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
    else if (s.generated >= req.maxTokens || s.position >= this.model.config.seqLen) this.end(s, 'length')
  }

  private step(): void {
    const batch = [...this.active]
    this.m?.steps.inc()
    this.m?.batch.observe(batch.length)
    const logits = decodeStep(
      this.model,
      this.cache,
      batch.map((s) => s.last),
    )
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
