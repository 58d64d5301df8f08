/** @module Per-token log-probabilities and the top alternatives OpenAI's `logprobs` asks for. */

/** log-softmax of one row of logits (temperature 1: the model's own distribution). */
export function logSoftmax(x: Float32Array): Float64Array {
  let max = -Infinity
  for (const v of x) if (v > max) max = v
  let s = 0
  for (const v of x) s += Math.exp(v - max)
  const lse = max + Math.log(s)
  return Float64Array.from(x, (v) => v - lse)
}

/** The `k` most likely ids with their log-probabilities, best first. */
export function topLogprobs(lp: Float64Array, k: number): [number, number][] {
  if (k <= 0) return []
  const best: [number, number][] = []
  for (let i = 0; i < lp.length; i++) {
    const v = lp[i]!
    if (best.length < k || v > best[best.length - 1]![1]) {
      best.push([i, v])
      best.sort((a, b) => b[1] - a[1] || a[0] - b[0])
      if (best.length > k) best.pop()
    }
  }
  return best
}

/** What OpenAI's `logit_bias`, `presence_penalty` and `frequency_penalty` ask of a sequence's logits. */
export type LogitsProcessing = {
  readonly logitBias?: ReadonlyMap<number, number>
  /** Subtracted once from the logit of every token already generated. */
  readonly presence?: number
  /** Subtracted from a token's logit per time it was already generated. */
  readonly frequency?: number
}

/** Whether `p` changes anything. */
export function processes(p: LogitsProcessing): boolean {
  return (p.logitBias?.size ?? 0) > 0 || (p.presence ?? 0) !== 0 || (p.frequency ?? 0) !== 0
}

/**
 * A copy of `logits` with the bias added and the penalties subtracted, as OpenAI defines them:
 * `logit[t] + bias[t] − presence·[count[t] > 0] − frequency·count[t]`, counting tokens the
 * sequence generated so far.
 */
export function applyLogitsProcessing(
  logits: Float32Array,
  p: LogitsProcessing,
  counts: ReadonlyMap<number, number>,
): Float32Array {
  const out = logits.slice()
  for (const [t, b] of p.logitBias ?? []) if (t < out.length) out[t] = out[t]! + b
  const presence = p.presence ?? 0,
    frequency = p.frequency ?? 0
  if (presence !== 0 || frequency !== 0)
    for (const [t, n] of counts) if (n > 0 && t < out.length) out[t] = out[t]! - presence - frequency * n
  return out
}

export type SampleOptions = {
  /** 0 is greedy. @default 1 */
  readonly temperature?: number
  /** Nucleus: the most likely tokens whose probabilities reach this. @default 1 */
  readonly topP?: number
  readonly topK?: number
}

/**
 * The token levanter's `sampleToken` picks for the same logits, options and random draw — the
 * candidates in order of probability (lower id first on ties), cut to `topK`, then to the nucleus
 * `topP`, one uniform draw over what is left — but without sorting the vocabulary: a binary heap
 * (built in O(V)) yields candidates best first, and only as many are taken as the cut or the draw
 * needs, so a peaked distribution costs O(V + k log V) rather than O(V log V).
 * @param rng anything with levanter `Rng`'s `next()`; one number is drawn unless greedy
 */
export function sampleNext(logits: Float32Array, o: SampleOptions, rng: { next(): number }): number {
  const temp = o.temperature ?? 1
  if (temp === 0) {
    let best = 0
    for (let i = 1; i < logits.length; i++) if (logits[i]! > logits[best]!) best = i
    return best
  }
  const lp = logSoftmax(Float32Array.from(logits, (v) => v / temp))
  const V = lp.length
  const heap = new Int32Array(V)
  for (let i = 0; i < V; i++) heap[i] = i
  const before = (a: number, b: number) => lp[a]! > lp[b]! || (lp[a] === lp[b] && a < b)
  let n = V
  const down = (at: number) => {
    let i = at
    for (;;) {
      const l = 2 * i + 1,
        r = l + 1
      let m = i
      if (l < n && before(heap[l]!, heap[m]!)) m = l
      if (r < n && before(heap[r]!, heap[m]!)) m = r
      if (m === i) return
      const t = heap[i]!
      heap[i] = heap[m]!
      heap[m] = t
      i = m
    }
  }
  for (let i = (n >> 1) - 1; i >= 0; i--) down(i)
  const pop = () => {
    const top = heap[0]!
    heap[0] = heap[--n]!
    down(0)
    return top
  }
  const maxKeep = o.topK !== undefined ? Math.min(V, Math.max(1, o.topK)) : V
  const topP = o.topP ?? 1
  if (topP >= 1 && maxKeep === V) {
    // No cut: the draw walks the whole distribution best first; only the walked prefix is popped.
    let total = 0
    for (let i = 0; i < V; i++) total += Math.exp(lp[i]!)
    let u = rng.next() * total,
      last = 0
    while (n > 0) {
      last = pop()
      u -= Math.exp(lp[last]!)
      if (u <= 0) return last
    }
    return last
  }
  const kept: number[] = []
  let cum = 0
  while (kept.length < maxKeep && (topP >= 1 || cum < topP)) {
    const t = pop()
    kept.push(t)
    cum += Math.exp(lp[t]!)
  }
  const probs = kept.map((i) => Math.exp(lp[i]!))
  let u = rng.next() * probs.reduce((a, b) => a + b, 0)
  for (let j = 0; j < kept.length; j++) {
    u -= probs[j]!
    if (u <= 0) return kept[j]!
  }
  return kept[kept.length - 1]!
}
