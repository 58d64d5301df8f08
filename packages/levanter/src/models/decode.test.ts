import * as tf from '@tensorflow/tfjs'
import { beforeAll, describe, expect, test } from 'vitest'
import { initBackend } from '../backend.js'
import { BatchCache } from './batch-cache.js'
import { decodeStep, prefill } from './decode.js'
import { createModel } from './lm.js'
import type { CausalLM } from './lm.js'

const tiny = { vocabSize: 23, seqLen: 20, dModel: 16, nLayers: 2, nHeads: 2 }

beforeAll(async () => {
  await initBackend()
})

/** The full forward pass over `seq` alone: logits [T·V]. */
const full = (m: CausalLM, seq: readonly number[]) =>
  tf.tidy(() => m.forward(tf.tensor2d([[...seq]], [1, seq.length], 'int32')).dataSync() as Float32Array)

/**
 * A decode step's logits equal the full forward's: bit for bit in most steps (levanter's GEMM keeps a
 * row's operation order whatever the rows around it), within float32 rounding (a few 1e-9) in others.
 */
function expectSame(got: Float32Array, want: Float32Array): void {
  expect(got.length).toBe(want.length)
  let d = 0
  for (let i = 0; i < got.length; i++) d = Math.max(d, Math.abs(got[i]! - want[i]!))
  expect(d).toBeLessThan(1e-6)
}

describe.each(['gpt2', 'llama'] as const)('%s batched decoding', (type) => {
  test('prefill of prompts of different lengths gives each prompt the full forward logits at every position', () => {
    const m = createModel({ type, ...tiny }, 11)
    const prompts = [[3, 1, 4, 1, 5, 9], [2], [7, 1, 8]]
    const { logits, kv } = prefill(m, prompts, true)
    prompts.forEach((p, r) => expect(Array.from(logits[r]!)).toEqual(Array.from(full(m, p))))
    const last = prefill(m, prompts, false)
    prompts.forEach((p, r) =>
      expect(Array.from(last.logits[r]!)).toEqual(Array.from(full(m, p).slice((p.length - 1) * tiny.vocabSize))),
    )
    for (const l of [...kv, ...last.kv]) tf.dispose([l.k, l.v])
    m.dispose()
  })

  test(
    'rows at different positions decoded in one batch equal the full ' +
      'forward at each position; rows join and leave',
    () => {
      const m = createModel({ type, ...tiny }, 12)
      const V = tiny.vocabSize
      const before = tf.memory().numTensors
      const seqs = [[5, 6, 7, 8, 9], [4]]
      const cache = new BatchCache()
      const first = prefill(m, seqs, false)
      cache.add(
        first.kv,
        seqs.map((s) => s.length),
      )
      const check = (logits: Float32Array) =>
        seqs.forEach((s, r) => {
          const want = full(m, s).slice((s.length - 1) * V)
          expectSame(logits.subarray(r * V, (r + 1) * V), want)
        })
      check(Float32Array.from(first.logits.flatMap((l) => Array.from(l))))
      for (let t = 0; t < 4; t++) {
        if (t === 2) {
          // a third row joins at its position 2 while the others are further on
          cache.add(prefill(m, [[1, 2]], false).kv, [2])
          seqs.push([1, 2])
        }
        const next = seqs.map((s, r) => (s.at(-1)! * 7 + r + t) % V)
        seqs.forEach((s, r) => s.push(next[r]!))
        check(decodeStep(m, cache, next))
        expect(cache.lengths).toEqual(seqs.map((s) => s.length))
      }
      cache.keep([2, 0]) // the short row leaves; the others keep their positions
      const kept = [seqs[2]!, seqs[0]!]
      kept.forEach((s) => s.push(3))
      const logits = decodeStep(m, cache, [3, 3])
      kept.forEach((s, r) => expectSame(logits.subarray(r * V, (r + 1) * V), full(m, s).slice((s.length - 1) * V)))
      cache.dispose()
      expect(tf.memory().numTensors).toBe(before)
      m.dispose()
    },
  )

  test('a step past the context length fails with BAD_SHAPE naming seqLen', () => {
    const m = createModel({ type, ...tiny, seqLen: 4 }, 13)
    const cache = new BatchCache()
    const p = prefill(m, [[1, 2, 3, 4]], false)
    cache.add(p.kv, [4])
    expect(() => decodeStep(m, cache, [1])).toThrow(/seqLen 4/)
    cache.dispose()
    m.dispose()
  })
})
