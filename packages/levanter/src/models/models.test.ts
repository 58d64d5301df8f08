import * as tf from '@tensorflow/tfjs'
import { beforeAll, describe, expect, test } from 'vitest'
import { initBackend } from '../backend.js'
import { transposeIsFree } from '../kernels/wasm-gemm.js'
import { maskedCrossEntropy } from '../loss.js'
import { Gpt2LM, LlamaLM, createModel } from './lm.js'
import { ModelConfig } from './config.js'

const tiny = { vocabSize: 17, seqLen: 12, dModel: 16, nLayers: 2, nHeads: 2 }

function maxDiff(a: tf.Tensor, b: tf.Tensor): number {
  expect(a.shape).toEqual(b.shape)
  const x = a.dataSync(),
    y = b.dataSync()
  let m = 0
  for (let i = 0; i < x.length; i++) m = Math.max(m, Math.abs(x[i]! - y[i]!))
  return m
}

beforeAll(async () => {
  await initBackend()
})

describe('models', () => {
  test('configs parse with defaults and reject unknown keys', () => {
    expect(ModelConfig.parse({ type: 'gpt2', vocabSize: 10 }).dModel).toBe(768)
    expect(() => ModelConfig.parse({ type: 'gpt2', vocabSize: 10, hidden: 3 })).toThrow()
    expect(() => createModel({ type: 'llama', vocabSize: 10, dModel: 10, nHeads: 3 })).toThrow(
      /dModel 10 is not a multiple of nHeads 3/,
    )
  })

  test.for([
    ['gpt2', {}],
    ['llama', { tieWordEmbeddings: true }],
  ] as const)(
    '%s: the tied head reads the embedding in place (no [V, D] transpose per pass)',
    async ([type, extra], ctx) => {
      if (!transposeIsFree()) return ctx.skip('this backend transposes products first')
      const m = createModel({ type, ...tiny, ...extra }, 3)
      const ids = tf.tensor2d([[1, 2, 3]], [1, 3], 'int32')
      const p = await tf.profile(() => tf.dispose(m.forward(ids)))
      const big = p.kernels.filter((k) => k.name === 'Transpose' && k.inputShapes[0]?.join() === `${tiny.vocabSize},16`)
      expect(big).toEqual([])
      ids.dispose()
      m.dispose()
    },
  )

  test('parameter counts match the closed form', () => {
    const g = new Gpt2LM(tiny)
    const D = 16,
      V = 17,
      T = 12
    expect(g.numParams()).toBe(V * D + T * D + 2 * (12 * D * D + 13 * D) + 2 * D)
    const l = new LlamaLM(tiny)
    const F = 64 // ceil(8·16/3/32)·32
    expect(l.numParams()).toBe(2 * V * D + 2 * (4 * D * D + 3 * D * F + 2 * D) + D)
  })

  test.each(['gpt2', 'llama'] as const)('%s: init is deterministic from the seed', async (type) => {
    const a = createModel({ type, ...tiny }, 7),
      b = createModel({ type, ...tiny }, 7),
      c = createModel({ type, ...tiny }, 8)
    const ids = tf.tensor2d([[1, 2, 3, 4]], [1, 4], 'int32')
    expect(maxDiff(a.forward(ids), b.forward(ids))).toBe(0)
    expect(maxDiff(a.forward(ids), c.forward(ids))).toBeGreaterThan(0)
  })

  test.each(['gpt2', 'llama'] as const)(
    '%s: attention is causal (later tokens do not change earlier logits)',
    (type) => {
      const m = createModel({ type, ...tiny }, 1)
      const a = m.forward(tf.tensor2d([[1, 2, 3, 4, 5]], [1, 5], 'int32'))
      const b = m.forward(tf.tensor2d([[1, 2, 3, 9, 9]], [1, 5], 'int32'))
      expect(maxDiff(a.slice([0, 0, 0], [1, 3, 17]), b.slice([0, 0, 0], [1, 3, 17]))).toBeLessThan(1e-6)
      expect(maxDiff(a.slice([0, 3, 0], [1, 2, 17]), b.slice([0, 3, 0], [1, 2, 17]))).toBeGreaterThan(1e-6)
    },
  )

  test('loss mask: masked positions do not count', () => {
    const logits = tf.randomNormal([1, 4, 5], 0, 1, 'float32', 3)
    const targets = tf.tensor2d([[1, 2, 3, 4]], [1, 4], 'int32')
    const all = maskedCrossEntropy(logits, targets, tf.ones([1, 4])).dataSync()[0]!
    const half = maskedCrossEntropy(logits, targets, tf.tensor2d([[1, 1, 0, 0]])).dataSync()[0]!
    const firstTwo = maskedCrossEntropy(
      logits.slice([0, 0, 0], [1, 2, 5]),
      targets.slice([0, 0], [1, 2]),
      tf.ones([1, 2]),
    ).dataSync()[0]!
    expect(half).toBeCloseTo(firstTwo, 5)
    expect(all).not.toBeCloseTo(half, 3)
    // Uniform logits give ln V.
    expect(maskedCrossEntropy(tf.zeros([1, 4, 5]), targets, tf.ones([1, 4])).dataSync()[0]!).toBeCloseTo(Math.log(5), 5)
  })
})

describe('layers', () => {
  test('linear with bias: values and gradients equal the plain ops', async () => {
    const { linear } = await import('./layers.js')
    const x = tf.randomNormal([2, 3, 4], 0, 1, 'float32', 1),
      w = tf.randomNormal([4, 5], 0, 1, 'float32', 2),
      b = tf.randomNormal([5], 0, 1, 'float32', 3)
    const ours = (a: tf.Tensor, c: tf.Tensor, d: tf.Tensor) => tf.sum(tf.square(linear(a, c, d)))
    const plain = (a: tf.Tensor, c: tf.Tensor, d: tf.Tensor) =>
      tf.sum(tf.square(tf.add(tf.matMul(tf.reshape(a, [6, 4]), c), d)))
    expect(
      maxDiff(linear(x, w, b), tf.reshape(tf.add(tf.matMul(tf.reshape(x, [6, 4]), w), b), [2, 3, 5])),
    ).toBeLessThan(1e-6)
    const g1 = tf.grads(ours)([x, w, b]),
      g2 = tf.grads(plain)([x, w, b])
    g1.forEach((g, i) => expect(maxDiff(g, g2[i]!)).toBeLessThan(1e-4))
  })
})
