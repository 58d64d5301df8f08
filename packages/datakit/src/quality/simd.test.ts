import { describe, expect, test } from 'vitest'
import { softmax, softmaxSimd } from './classifier.js'
import { simdKernels } from './simd.js'
import { trainClassifier } from './train.js'

/** Deterministic values in [-1, 1). */
function values(n: number, seed: number): Float64Array {
  const out = new Float64Array(n)
  let s = seed >>> 0 || 1
  for (let i = 0; i < n; i++) {
    s ^= s << 13
    s ^= s >>> 17
    s ^= s << 5
    out[i] = ((s >>> 0) / 2 ** 32) * 2 - 1
  }
  return out
}

describe('SIMD kernels', () => {
  test('dim not a multiple of 4: none (the JavaScript loops are used)', () => {
    expect(simdKernels(3, 10)).toBeUndefined()
  })

  test('softmax and the rank-one update agree with plain loops (float32 tolerance)', () => {
    const nlabels = 37
    const dim = 100
    const k = simdKernels(nlabels, dim)!
    expect(k).toBeDefined()
    const output = Float32Array.from(values(nlabels * dim, 7))
    k.output.set(output)
    const hidden = values(dim, 11)
    const want = new Float64Array(nlabels)
    const got = new Float64Array(nlabels)
    softmax(output, hidden, nlabels, dim, want)
    softmaxSimd(k, hidden, nlabels, got)
    for (let i = 0; i < nlabels; i++) expect(got[i]).toBeCloseTo(want[i]!, 5)

    const alpha = values(nlabels, 13)
    k.scores.set(alpha)
    k.grad.fill(0)
    k.rank1()
    const hid32 = Float32Array.from(hidden)
    for (let j = 0; j < dim; j++) {
      let g = 0
      for (let i = 0; i < nlabels; i++) g += alpha[i]! * output[i * dim + j]!
      expect(k.grad[j]).toBeCloseTo(g, 4)
    }
    for (let i = 0; i < nlabels; i++)
      for (const j of [0, 1, 50, 99])
        expect(k.output[i * dim + j]).toBeCloseTo(output[i * dim + j]! + alpha[i]! * hid32[j]!, 5)
  })

  test('training takes the same course with the kernels (dim 12) and without (dim 10)', () => {
    const lines = Array.from({ length: 40 }, (_, i) =>
      i % 2 ? `__label__fruit apple pear banana ${i}` : `__label__car wheel engine brake ${i}`,
    )
    for (const dim of [10, 12]) {
      const { classifier } = trainClassifier(lines, { dim, epoch: 20, lr: 0.5 })
      expect(classifier.top('pear banana')).toBe('__label__fruit')
      expect(classifier.top('engine wheel')).toBe('__label__car')
      expect(classifier.probability('engine wheel', 'car')).toBeGreaterThan(0.8)
    }
  })
})
