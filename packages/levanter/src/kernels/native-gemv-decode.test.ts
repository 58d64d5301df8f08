import * as tf from '@tensorflow/tfjs'
import { beforeAll, describe, expect, test } from 'vitest'
import { initBackend } from '../backend.js'
import { decodeStepFastOnDevice, generate } from '../generate.js'
import { BatchCache } from '../models/batch-cache.js'
import { decodeStep, decodeStepOnDevice, prefillChunk, prefillOnDevice } from '../models/decode.js'
import { createModel, Gpt2LM } from '../models/lm.js'
import { bf16Unavailable } from './native-gemm.js'
import { nativeDecodeStep, nativeDecodeUnavailable, useNativeDecodeStep } from './native-gemv-decode.js'

// The one-call GPT-2 decode step (native/decode.cc decodeGpt2) against the step on tensor ops: the same logits and the
// same grown cache, bit for bit, at ragged rows; its bf16-weight form against the float32 step within a stated
// tolerance, and greedy tokens equal on a small model; BAD_CONFIG where bf16 weights cannot run.
let here: string | undefined = 'not set up'
const config = { vocabSize: 1003, seqLen: 64, dModel: 96, nLayers: 3, nHeads: 4 }
beforeAll(async () => {
  await initBackend()
  here = nativeDecodeUnavailable()
})

function cacheOf(model: Parameters<typeof prefillOnDevice>[0], prompts: number[][]): BatchCache {
  const c = new BatchCache()
  const p = prefillOnDevice(model, prompts, false)
  c.add(
    p.kv,
    prompts.map((x) => x.length),
  )
  p.logits.dispose()
  return c
}

const read = (t: tf.Tensor) => {
  const d = t.dataSync() as Float32Array
  t.dispose()
  return d
}

describe('the one-call GPT-2 decode step', () => {
  test.for([
    {
      rows: 3,
      prompts: [
        [1, 2, 3, 4, 5, 6, 7],
        [9, 10],
        [11, 12, 13, 14],
      ],
    },
    // more rows than the small-M kernel takes at once: the head over strips of columns, four rows at a time; the
    // block matrices on the batch kernel
    { rows: 6, prompts: [[1, 2, 3], [4], [5, 6, 7, 8, 9, 10, 11, 12], [13, 14], [15, 16, 17, 18, 19], [20, 21, 22]] },
    // a server's batch: the block matrices on the batch kernel (native/gemv-batch.h), groups of 8 and 4 rows and one
    {
      rows: 17,
      prompts: Array.from({ length: 17 }, (_, r) => Array.from({ length: 1 + ((r * 5) % 9) }, (_, j) => r + j)),
    },
  ])("answers the tensor-op step's logits and grown cache bit for bit ($rows ragged rows, 5 steps)", (p, ctx) => {
    if (here) return ctx.skip()
    const model = new Gpt2LM(config, 3)
    const ops = cacheOf(model, p.prompts),
      one = cacheOf(model, p.prompts)
    for (let s = 0; s < 5; s++) {
      const toks = p.prompts.map((_, r) => (r * 331 + s * 17) % config.vocabSize)
      const a = read(decodeStepOnDevice(model, ops, toks))
      const b = nativeDecodeStep(model, one, toks)
      expect(b).toBeDefined()
      expect(b!.shape).toEqual([p.rows, 1, config.vocabSize])
      expect(read(b!)).toEqual(a)
      expect(one.lengths).toEqual(ops.lengths)
      for (let l = 0; l < config.nLayers; l++) {
        expect(one.layers[l]!.k.shape).toEqual(ops.layers[l]!.k.shape)
        expect(one.layers[l]!.k.dataSync()).toEqual(ops.layers[l]!.k.dataSync())
        expect(one.layers[l]!.v.dataSync()).toEqual(ops.layers[l]!.v.dataSync())
      }
    }
    ops.dispose()
    one.dispose()
    model.dispose()
  })

  test('grows the cache in place: rows join and leave, a prefill chunk, an absorbed cache', async (ctx) => {
    if (here) return ctx.skip()
    const model = new Gpt2LM(config, 6)
    const before = tf.memory().numTensors
    const prompts = [[1, 2, 3, 4, 5, 6], [7], [8, 9, 10], [11, 12], [13, 14, 15, 16, 17]]
    const ops = cacheOf(model, prompts),
      one = cacheOf(model, prompts)
    const same = () => {
      expect(one.lengths).toEqual(ops.lengths)
      expect(one.width).toBe(ops.width)
      for (let l = 0; l < config.nLayers; l++) {
        expect(one.layers[l]!.k.shape).toEqual(ops.layers[l]!.k.shape)
        expect(one.layers[l]!.k.dataSync()).toEqual(ops.layers[l]!.k.dataSync())
        expect(one.layers[l]!.v.dataSync()).toEqual(ops.layers[l]!.v.dataSync())
      }
    }
    const capacities = new Set<number>()
    let inPlace = 0
    for (let s = 0; s < 20; s++) {
      if (s === 4)
        for (const c of [ops, one]) {
          const p = prefillOnDevice(model, [[20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30]], false)
          p.logits.dispose()
          c.add(p.kv, [11])
        }
      if (s === 8) for (const c of [ops, one]) c.keep([3, 0, 5, 1])
      if (s === 12) {
        const chunk = ops.lengths.map((_, r) => [r + 40, r + 41])
        expect(await prefillChunk(model, one, chunk, true)).toEqual(await prefillChunk(model, ops, chunk, true))
        same()
      }
      if (s === 15) {
        // a sequence prefilled and stepped in a cache of its own (grown in place there too) joins both
        for (const c of [ops, one]) {
          const own = cacheOf(model, [[50, 51, 52]])
          for (let t = 0; t < 3; t++) {
            const l = c === one ? nativeDecodeStep(model, own, [60 + t]) : decodeStepOnDevice(model, own, [60 + t])
            l!.dispose()
          }
          c.absorb(own)
          expect(own.rows).toBe(0)
        }
      }
      const toks = ops.lengths.map((_, r) => (r * 211 + s * 29) % config.vocabSize)
      const cap = one.capacity,
        store = one.storage[0]!.k
      const a = read(decodeStepOnDevice(model, ops, toks))
      expect(read(nativeDecodeStep(model, one, toks)!)).toEqual(a)
      if (one.storage[0]!.k === store) inPlace++
      else expect(one.capacity).toBe(Math.max(one.width, Math.min(config.seqLen, Math.max(2 * (one.width - 1), 16))))
      if (one.capacity === cap) expect(one.storage[0]!.k).toBe(store)
      capacities.add(one.capacity)
      expect(one.capacity).toBeGreaterThanOrEqual(one.width)
      if (s % 4 === 3) same()
    }
    same()
    // most steps wrote their column in place; the capacity doubled where it ran out
    expect(inPlace).toBeGreaterThan(12)
    expect(capacities.size).toBeGreaterThan(1)
    ops.dispose()
    one.dispose()
    expect(tf.memory().numTensors).toBe(before)
    model.dispose()
  })

  test('generate takes it and gives the tokens and log-probabilities of the tensor-op steps', (ctx) => {
    if (here) return ctx.skip()
    const model = new Gpt2LM(config, 5)
    const o = { maxNewTokens: 12, temperature: 0.8, seed: 7 }
    const fast = generate(model, [3, 1, 4, 1, 5], o)
    const was = useNativeDecodeStep(false)
    const slow = (() => {
      try {
        return generate(model, [3, 1, 4, 1, 5], o)
      } finally {
        useNativeDecodeStep(was)
      }
    })()
    expect(fast).toEqual(slow)
    model.dispose()
  })

  test('declines a row at seqLen, a wrong token count; other architectures stay on tensor ops', (ctx) => {
    if (here) return ctx.skip()
    const llama = createModel({ type: 'llama', vocabSize: 64, seqLen: 16, dModel: 32, nLayers: 1, nHeads: 2 }, 0)
    // llama brings no native step: its decode runs on tensor ops (the same logits as decodeStepOnDevice)
    const [la, lb] = [cacheOf(llama, [[1, 2, 3]]), cacheOf(llama, [[1, 2, 3]])]
    expect(read(decodeStepFastOnDevice(llama, la, [4]))).toEqual(read(decodeStepOnDevice(llama, lb, [4])))
    la.dispose()
    lb.dispose()
    const model = new Gpt2LM({ ...config, seqLen: 4 }, 1)
    const c = cacheOf(model, [[1, 2, 3, 4]])
    expect(nativeDecodeStep(model, c, [5])).toBeUndefined()
    expect(nativeDecodeStep(model, c, [5, 6])).toBeUndefined()
    expect(() => decodeStepFastOnDevice(model, c, [5])).toThrow(/seqLen 4/)
    c.dispose()
    model.dispose()
    llama.dispose()
  })
})

test("decodeStep takes GPT-2's one-call step: same logits, no tfjs kernels", async (ctx) => {
  if (here) return ctx.skip()
  const model = new Gpt2LM(config, 3)
  const [a, b] = [cacheOf(model, [[4, 5, 6]]), cacheOf(model, [[4, 5, 6]])]
  let got: Float32Array = new Float32Array()
  // tf.profile answers one object it reuses: read each count before the next profile
  const fast = (
    await tf.profile(async () => {
      got = await decodeStep(model, a, [7])
    })
  ).kernels.length
  const ops = (await tf.profile(async () => read(decodeStepOnDevice(model, b, [7])))).kernels.length
  expect(ops).toBeGreaterThan(50) // the step on tensor ops: ~20 kernels a layer
  expect(fast).toBeLessThan(5)
  expect(got).toEqual(read(decodeStepOnDevice(model, cacheOf(model, [[4, 5, 6]]), [7])))
  a.dispose()
  b.dispose()
  model.dispose()
})

describe('bf16 weights in the decode step', () => {
  test('logits within the stated tolerance of the float32 step, greedy tokens equal', (ctx) => {
    if (here || bf16Unavailable()) return ctx.skip()
    const model = new Gpt2LM(config, 11)
    const prompts = [
      [5, 6, 7, 8, 9],
      [100, 200, 300],
    ]
    const f = cacheOf(model, prompts),
      h = cacheOf(model, prompts)
    for (let s = 0; s < 4; s++) {
      const toks = [s + 20, 700 - s]
      const a = read(nativeDecodeStep(model, f, toks)!),
        b = read(nativeDecodeStep(model, h, toks, { weights: 'bf16' })!)
      // bf16 keeps 8 bits of each weight and activation: every logit within 2% of the logits' largest magnitude
      let scale = 0,
        worst = 0
      for (let i = 0; i < a.length; i++) {
        scale = Math.max(scale, Math.abs(a[i]!))
        worst = Math.max(worst, Math.abs(a[i]! - b[i]!))
      }
      expect(worst).toBeLessThanOrEqual(0.02 * scale)
      expect(worst).toBeGreaterThan(0) // the bf16 products did run
    }
    f.dispose()
    h.dispose()
    const o = { maxNewTokens: 16, temperature: 0 }
    expect(generate(model, [1, 2, 3], { ...o, weights: 'bf16' }).tokens).toEqual(generate(model, [1, 2, 3], o).tokens)
    model.dispose()
  })

  test('BAD_CONFIG naming why where it cannot run', async () => {
    const llama = createModel({ type: 'llama', vocabSize: 64, seqLen: 16, dModel: 32, nLayers: 1, nHeads: 2 }, 0)
    expect(() => generate(llama, [1, 2], { weights: 'bf16' })).toThrow(
      /weights 'bf16'.*"llama" has none \(those with one: gpt2\)/,
    )
    const model = new Gpt2LM(config, 1)
    expect(() => generate(model, [1, 2], { weights: 'bf16', useCache: false })).toThrow(/useCache/)
    expect(() => generate(model, [1, 2], { weights: 'fp16' as never })).toThrow(/not 'fp32' or 'bf16'/)
    const before = tf.getBackend()
    await tf.setBackend('cpu')
    try {
      expect(() => generate(model, [1, 2], { weights: 'bf16' })).toThrow(
        expect.objectContaining({ code: 'BAD_CONFIG', message: expect.stringMatching(/wasm backend, this is cpu/) }),
      )
    } finally {
      await tf.setBackend(before)
    }
    model.dispose()
    llama.dispose()
  })
})
