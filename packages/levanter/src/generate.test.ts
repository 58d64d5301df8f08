import { beforeAll, describe, expect, test } from 'vitest'
import { initBackend } from './backend.js'
import { generate, score } from './generate.js'
import { createModel } from './models/lm.js'

const tiny = { vocabSize: 19, seqLen: 24, dModel: 16, nLayers: 2, nHeads: 2 }
/** Qwen3 with grouped-query attention (4 query heads over 2 key/value heads) and heads of 6, not dModel / nHeads. */
const configOf = (type: 'gpt2' | 'llama' | 'qwen3') =>
  type === 'qwen3' ? { type, ...tiny, nHeads: 4, nKvHeads: 2, headDim: 6 } : { type, ...tiny }

beforeAll(async () => {
  await initBackend()
})

describe.each(['gpt2', 'llama', 'qwen3'] as const)('%s generation', (type) => {
  test('cached decoding picks the same tokens with the same log-probs as full re-forward', () => {
    const m = createModel(configOf(type), 9)
    const o = { maxNewTokens: 10, temperature: 0.9, topK: 8, topP: 0.95, seed: 3 }
    const a = generate(m, [1, 2, 3], o),
      b = generate(m, [1, 2, 3], { ...o, useCache: false })
    expect(a.tokens).toEqual(b.tokens)
    a.logprobs.forEach((lp, i) => expect(lp).toBeCloseTo(b.logprobs[i]!, 4))
    expect(generate(m, [1, 2, 3], o).tokens).toEqual(a.tokens) // same seed, same sample
  })

  test('greedy = top-k 1; stop sequences end generation; score agrees with the log-probs', () => {
    const m = createModel(configOf(type), 10)
    const g = generate(m, [4, 5], { maxNewTokens: 6, temperature: 0 })
    expect(generate(m, [4, 5], { maxNewTokens: 6, topK: 1, seed: 99 }).tokens).toEqual(g.tokens)
    const s = score(m, [4, 5], g.tokens)
    expect(s.greedy).toBe(true)
    expect(s.logprob).toBeCloseTo(
      g.logprobs.reduce((a, b) => a + b),
      3,
    )
    const stopped = generate(m, [4, 5], { maxNewTokens: 6, temperature: 0, stop: [g.tokens.slice(1, 3)] })
    expect(stopped.finish).toBe('stop')
    expect(stopped.tokens).toEqual(g.tokens.slice(0, 3))
  })
})
