import { expect, test } from 'vitest'
import { parseDuration } from './duration.js'

test('durations', () => {
  expect(parseDuration('250ms')).toBe(250)
  expect(parseDuration('5m')).toBe(300_000)
  expect(parseDuration('1h30m')).toBe(5_400_000)
  expect(parseDuration('2d')).toBe(172_800_000)
  expect(parseDuration('1.5s')).toBe(1500)
  expect(parseDuration('30')).toBe(30_000)
})

test.each(['', '5 minutes', 'm5', '5x', '1h-30m'])('refuses %j', (text) => {
  expect(() => parseDuration(text, '--since')).toThrow(/--since=".*" is not a duration; write e\.g\. 30s, 5m/)
})
