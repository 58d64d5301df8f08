import { Rng, logSoftmax, sampleToken } from '@marin/levanter'
import { describe, expect, test } from 'vitest'
import { applyLogitsProcessing, processes } from './sampling.js'

/** Logits from a seeded generator, a few tokens far likelier than the rest (as a trained model's). */
function logits(V: number, seed: number): Float32Array {
  const r = new Rng(seed)
  const x = Float32Array.from({ length: V }, () => r.normal())
  for (let i = 0; i < 5; i++) x[Math.floor(r.next() * V)]! += 4 * (i + 1)
  return x
}

describe("serve's logits processing ahead of levanter's draw", () => {
  test('processes: only a bias or a non-zero penalty changes the row', () => {
    expect(processes({})).toBe(false)
    expect(processes({ logitBias: new Map(), presence: 0, frequency: 0 })).toBe(false)
    expect(processes({ logitBias: new Map([[1, 0.5]]) })).toBe(true)
    expect(processes({ presence: 0.1 })).toBe(true)
    expect(processes({ frequency: -0.1 })).toBe(true)
  })

  test('a bias of +100 forces a token and −100 bans one, at every temperature and cut', () => {
    for (let seed = 0; seed < 20; seed++) {
      const x = logits(500, seed)
      let best = 0
      for (let i = 1; i < x.length; i++) if (x[i]! > x[best]!) best = i
      const forced = applyLogitsProcessing(x, { logitBias: new Map([[7, 100]]) }, new Map())
      const banned = applyLogitsProcessing(x, { logitBias: new Map([[best, -100]]) }, new Map())
      for (const o of [{ temperature: 0 }, { temperature: 1 }, { temperature: 1.5, topP: 0.9 }, { topK: 3 }]) {
        expect(sampleToken(forced, o, new Rng(seed))).toBe(7)
        expect(sampleToken(banned, o, new Rng(seed))).not.toBe(best)
      }
    }
  })

  test('without processing, the log-softmax the engine reports is what the draw uses (the same token)', () => {
    for (let seed = 0; seed < 20; seed++) {
      const x = logits(500, seed)
      const lp = logSoftmax(x)
      for (const o of [{ temperature: 1 }, { temperature: 1, topP: 0.7 }, { temperature: 1, topK: 4 }])
        expect(sampleToken(x, o, new Rng(seed), lp)).toBe(sampleToken(x, o, new Rng(seed)))
    }
  })

  test('penalties count what the sequence generated: presence once, frequency per time', () => {
    const x = new Float32Array([1, 3, 2])
    const out = applyLogitsProcessing(x, { presence: 1, frequency: 0.5 }, new Map([[1, 4]]))
    expect([...out]).toEqual([1, 3 - 1 - 2, 2])
    expect(sampleToken(x, { temperature: 0 }, new Rng(0))).toBe(1)
    expect(sampleToken(out, { temperature: 0 }, new Rng(0))).toBe(2) // the penalised favourite loses greedy
  })
})
