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
