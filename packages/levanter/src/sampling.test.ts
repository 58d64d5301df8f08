import { describe, expect, test } from 'vitest'
import { Rng } from './rng.js'
import { logSoftmax, sampleToken, topLogprobs } from './sampling.js'
import type { SampleOptions } from './sampling.js'

/**
 * The definition `sampleToken` must reproduce, written the plain way: sort the whole vocabulary by
 * probability (a stable sort: lower id first on ties), cut to top-k, then to the nucleus, and walk
 * one uniform draw scaled by the kept probabilities' sum.
 */
function sortedDraw(logits: Float32Array, o: SampleOptions, rng: { next(): number }): number {
  const temp = o.temperature ?? 1
  if (temp === 0) return logits.reduce((best, v, i) => (v > logits[best]! ? i : best), 0)
  const scaled = Float32Array.from(logits, (v) => v / temp)
  let max = -Infinity
  for (const v of scaled) max = Math.max(max, v)
  let s = 0
  for (const v of scaled) s += Math.exp(v - max)
  const lse = max + Math.log(s)
  const lp = Float64Array.from(scaled, (v) => v - lse)
  let order = [...lp.keys()].sort((a, b) => lp[b]! - lp[a]!)
  if (o.topK !== undefined) order = order.slice(0, Math.max(1, o.topK))
  const topP = o.topP ?? 1
  if (topP < 1) {
    let cum = 0,
      keep = 0
    while (keep < order.length && cum < topP) cum += Math.exp(lp[order[keep++]!]!)
    order = order.slice(0, Math.max(1, keep))
  }
  const probs = order.map((i) => Math.exp(lp[i]!))
  let u = rng.next() * probs.reduce((a, b) => a + b, 0)
  for (let j = 0; j < order.length; j++) {
    u -= probs[j]!
    if (u <= 0) return order[j]!
  }
  return order[order.length - 1]!
}

/** Logits from a seeded generator: `peak` > 0 makes a few tokens far likelier (as a trained model's). */
function logits(V: number, seed: number, peak: number): Float32Array {
  const r = new Rng(seed)
  const x = Float32Array.from({ length: V }, () => r.normal())
  for (let i = 0; i < 5; i++) x[Math.floor(r.next() * V)]! += peak * (i + 1)
  return x
}

describe('sampleToken: the draw of a sort over the vocabulary, without sorting it', () => {
  const grid = [
    { temperature: 0 },
    { temperature: 1 },
    { temperature: 0.7, topP: 0.9 },
    { temperature: 1, topP: 0.5 },
    { temperature: 0.9, topK: 10 },
    { temperature: 1.3, topK: 1 },
    { temperature: 0.8, topP: 0.95, topK: 40 },
  ]
  test.each(grid)('%j over small and large vocabularies, flat and peaked', (o) => {
    for (const [V, peak] of [
      [300, 0],
      [300, 4],
      [8000, 6],
      [8000, 0],
      [50257, 8],
    ] as const) {
      for (let seed = 0; seed < (V > 10000 ? 4 : 25); seed++) {
        const x = logits(V, seed * 7 + V, peak)
        const a = new Rng(seed),
          b = new Rng(seed)
        expect(sampleToken(x, o, b)).toBe(sortedDraw(x, o, a))
        expect(b.next()).toBe(a.next()) // the same random numbers consumed
      }
    }
  })

  test("a caller's log-softmax (temperature 1) gives the same draws as sampleToken's own", () => {
    for (let seed = 0; seed < 25; seed++) {
      const x = logits(300, seed, seed % 2 ? 4 : 0)
      const lp = logSoftmax(x, new Float64Array(x.length))
      for (const o of [{ temperature: 1 }, { temperature: 1, topP: 0.8 }, { temperature: 1, topK: 5 }])
        expect(sampleToken(x, o, new Rng(seed), lp)).toBe(sortedDraw(x, o, new Rng(seed)))
      // another temperature scales the logits itself: the log-softmax given is not the one sampled from
      expect(sampleToken(x, { temperature: 0.5 }, new Rng(seed), lp)).toBe(
        sortedDraw(x, { temperature: 0.5 }, new Rng(seed)),
      )
    }
  })

  test('a draw that gets past the head of the distribution walks on through the rest, best first', () => {
    // one id far likelier than the rest: the head is that id alone, and draws near 1 go on into the tail
    const x = logits(8000, 5, 0)
    x[123] = 24
    for (const u of [0.5, 1 - 1e-9, 1 - 1e-7, 1 - 1e-12]) {
      const rng = { next: () => u }
      const got = sampleToken(x, { temperature: 1 }, rng)
      expect(got).toBe(sortedDraw(x, { temperature: 1 }, rng))
      if (u > 0.5) expect(got).not.toBe(123)
    }
  })

  test('a flat distribution over 50,257 ids (a random model): the draw walks far, in sort order', () => {
    // flat logits as a randomly initialised model gives, some quantised (exact ties across bucket edges), some
    // -Infinity (a logit bias that bans ids), one far outlier stretching the range; draws from 0 to just below 1
    const cases: Float32Array[] = []
    for (let seed = 0; seed < 3; seed++) cases.push(logits(50257, seed, 0))
    // ties by the thousand (a few levels), and in pairs and threes among other values (a fine grid)
    const ties = logits(50257, 9, 0).map((v) => Math.round(v * 4) / 4)
    const fineTies = logits(50257, 12, 0).map((v) => Math.round(v * 2048) / 2048)
    const banned = logits(50257, 10, 0)
    for (let i = 0; i < banned.length; i += 97) banned[i] = -Infinity
    const outlier = logits(20000, 11, 0)
    outlier[7] = -300
    cases.push(ties, fineTies, banned, outlier)
    for (const [c, x] of cases.entries()) {
      // the walk of a sort (stable: lower id first on ties) at temperature 1, made once for the case's draws, the
      // draw unscaled (as sampleToken's over the whole distribution)
      const lp = logSoftmax(x)
      const order = [...lp.keys()].sort((a, b) => lp[b]! - lp[a]!)
      for (const draw of [0, 1e-6, 0.3, 0.5, 0.77, 0.999, 1 - 1e-9]) {
        let u = draw,
          want = order[order.length - 1]!
        for (const i of order)
          if ((u -= Math.exp(lp[i]!)) <= 0) {
            want = i
            break
          }
        expect(sampleToken(x, { temperature: 1 }, { next: () => draw }, lp), `case ${c}, draw ${draw}`).toBe(want)
      }
    }
    // another temperature: the row's own log-softmax, the same walk
    const x = cases[1]!
    expect(sampleToken(x, { temperature: 0.8 }, new Rng(3))).toBe(sortedDraw(x, { temperature: 0.8 }, new Rng(3)))
  })

  test('ties keep the lower id first, as a stable sort does', () => {
    const x = new Float32Array([1, 3, 3, 3, 0])
    for (let seed = 0; seed < 40; seed++)
      for (const o of [{ temperature: 1, topK: 2 }, { temperature: 1, topP: 0.6 }, { temperature: 0 }])
        expect(sampleToken(x, o, new Rng(seed))).toBe(sortedDraw(x, o, new Rng(seed)))
  })
})

describe('logSoftmax and topLogprobs', () => {
  test('log-probabilities sum to 1 and keep the logits’ differences; the top k come best first, ties by id', () => {
    const x = new Float32Array([2, 0.5, 2, -1, 1])
    const lp = logSoftmax(x)
    expect(lp.reduce((a, v) => a + Math.exp(v), 0)).toBeCloseTo(1, 12)
    expect(lp[0]! - lp[4]!).toBeCloseTo(1, 12)
    expect(topLogprobs(lp, 3).map(([id]) => id)).toEqual([0, 2, 4])
    expect(topLogprobs(lp, 0)).toEqual([])
    expect(topLogprobs(lp, 9).map(([id]) => id)).toEqual([0, 2, 4, 1, 3])
  })
})
