import { Rng, sampleToken } from '@marin/levanter'
import { describe, expect, test } from 'vitest'
import { logSoftmax, sampleNext } from './sampling.js'

/** Logits from a seeded generator: `peak` > 0 makes a few tokens far likelier (as a trained model's). */
function logits(V: number, seed: number, peak: number): Float32Array {
  const r = new Rng(seed)
  const x = Float32Array.from({ length: V }, () => r.normal())
  for (let i = 0; i < 5; i++) x[Math.floor(r.next() * V)]! += peak * (i + 1)
  return x
}

describe('sampleNext: the same draw as levanter sampleToken, without sorting the vocabulary', () => {
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
    ] as const) {
      for (let seed = 0; seed < 25; seed++) {
        const x = logits(V, seed * 7 + V, peak)
        const a = new Rng(seed),
          b = new Rng(seed)
        const want = sampleToken(x, o, a)
        expect(sampleNext(x, o, b)).toBe(want)
        expect(b.next()).toBe(a.next()) // the same random numbers consumed
      }
    }
  })

  test("a caller's log-softmax (temperature 1) gives the same draws as sampleNext's own", () => {
    for (let seed = 0; seed < 25; seed++) {
      const x = logits(300, seed, seed % 2 ? 4 : 0)
      const lp = logSoftmax(x, new Float64Array(x.length))
      for (const o of [{ temperature: 1 }, { temperature: 1, topP: 0.8 }, { temperature: 1, topK: 5 }])
        expect(sampleNext(x, o, new Rng(seed), lp)).toBe(sampleToken(x, o, new Rng(seed)))
      // another temperature scales the logits itself: the log-softmax given is not the one sampled from
      expect(sampleNext(x, { temperature: 0.5 }, new Rng(seed), lp)).toBe(
        sampleToken(x, { temperature: 0.5 }, new Rng(seed)),
      )
    }
  })

  test('a draw that gets past the head of the distribution walks on through the rest, best first', () => {
    // one id far likelier than the rest: the head is that id alone, and draws near 1 go on into the tail
    const x = logits(8000, 5, 0)
    x[123] = 24
    for (const u of [0.5, 1 - 1e-9, 1 - 1e-7, 1 - 1e-12]) {
      const rng = { next: () => u }
      const got = sampleNext(x, { temperature: 1 }, rng)
      expect(got).toBe(sampleToken(x, { temperature: 1 }, rng as unknown as Rng))
      if (u > 0.5) expect(got).not.toBe(123)
    }
  })

  test('ties keep the lower id first, as a stable sort does', () => {
    const x = new Float32Array([1, 3, 3, 3, 0])
    for (let seed = 0; seed < 40; seed++)
      for (const o of [{ temperature: 1, topK: 2 }, { temperature: 1, topP: 0.6 }, { temperature: 0 }])
        expect(sampleNext(x, o, new Rng(seed))).toBe(sampleToken(x, o, new Rng(seed)))
  })
})
