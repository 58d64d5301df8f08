/**
 * @module What OpenAI's `logit_bias`, `presence_penalty` and `frequency_penalty` do to a sequence's
 * logits before levanter's `sampleToken` draws from them. Only the serve-side options live here:
 * the draw, the log-softmax and the top alternatives are levanter's (`@marin/levanter`), the same
 * code `generate` runs.
 */

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
