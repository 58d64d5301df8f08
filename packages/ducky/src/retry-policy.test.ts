import { expect, test } from 'vitest'
import { backoffMs, retryPolicy } from './retry-policy.js'

test('delays grow exponentially, are capped, and jitter stays within [cap/2, cap]', () => {
  const p = retryPolicy({ initialMs: 100, maxMs: 1000, multiplier: 2 })
  expect([0, 1, 2, 3, 4, 10].map((r) => backoffMs(p, r, () => 1))).toEqual([100, 200, 400, 800, 1000, 1000])
  expect([0, 1, 2, 3, 4].map((r) => backoffMs(p, r, () => 0))).toEqual([50, 100, 200, 400, 500])
  for (let i = 0; i < 100; i++) {
    const d = backoffMs(p, 2)
    expect(d).toBeGreaterThanOrEqual(200)
    expect(d).toBeLessThanOrEqual(400)
  }
})

test('defaults retry UNAVAILABLE and DEADLINE_EXCEEDED', () => {
  expect(retryPolicy().codes).toEqual(['UNAVAILABLE', 'DEADLINE_EXCEEDED'])
  expect(retryPolicy({ maxAttempts: 1 }).maxAttempts).toBe(1)
})
