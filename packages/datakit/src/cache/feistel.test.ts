import { describe, expect, test } from 'vitest'
import { FeistelPermutation } from './feistel.js'

describe('FeistelPermutation', () => {
  test.each([1, 2, 3, 17, 1000, 4097])('is a bijection of [0, %i)', (n) => {
    const p = new FeistelPermutation(n, 42)
    const seen = new Set(Array.from({ length: n }, (_, i) => p.apply(i)))
    expect(seen.size).toBe(n)
    expect(Math.max(...seen)).toBe(n - 1)
  })

  test('depends only on (n, seed)', () => {
    const order = (seed: number) => Array.from({ length: 50 }, (_, i) => new FeistelPermutation(50, seed).apply(i))
    expect(order(7)).toEqual(order(7))
    expect(order(7)).not.toEqual(order(8))
    expect(order(7)).not.toEqual(Array.from({ length: 50 }, (_, i) => i))
  })

  test('large domains and bad input', () => {
    const p = new FeistelPermutation(2 ** 40 + 3, 1)
    const v = p.apply(2 ** 40)
    expect(v).toBeGreaterThanOrEqual(0)
    expect(v).toBeLessThan(2 ** 40 + 3)
    expect(() => p.apply(-1)).toThrow(/outside/)
    expect(() => new FeistelPermutation(0, 1)).toThrow(/n must be an integer/)
  })
})
