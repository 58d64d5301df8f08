import { describe, expect, test } from 'vitest'
import { seededRandom } from './random.js'

describe('seededRandom', () => {
  test('the same seed gives the same sequence; another seed another one; values lie in [0, 1)', () => {
    const a = seededRandom(42),
      b = seededRandom(42),
      c = seededRandom(43)
    const xs = Array.from({ length: 1000 }, () => a())
    expect(Array.from({ length: 1000 }, () => b())).toEqual(xs)
    expect(Array.from({ length: 1000 }, () => c())).not.toEqual(xs)
    expect(xs.every((x) => x >= 0 && x < 1)).toBe(true)
    // The first output for seed 42, pinned so that the sequence never drifts silently.
    expect(seededRandom(42)()).toBeCloseTo(0.6011037519, 9)
  })
})
