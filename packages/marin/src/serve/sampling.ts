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
