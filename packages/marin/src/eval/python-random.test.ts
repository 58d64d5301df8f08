import { readFileSync } from 'node:fs'
import { describe, expect, test } from 'vitest'
import { PythonRandom } from './python-random.js'

/** Written by CPython 3.11's `random` (the script that wrote it is inside the file). */
const fixture = JSON.parse(
  readFileSync(new URL('./fixtures/lm-eval/python-random-1234.json', import.meta.url), 'utf8'),
) as {
  getrandbits32: number[]
  samples: { n: number; k: number; calls: number[][] }[]
}

describe('PythonRandom: CPython random.Random(seed)', () => {
  test('getrandbits(32) after Random(1234) matches CPython', () => {
    const r = new PythonRandom(1234)
    expect(fixture.getrandbits32.map(() => r.getrandbits(32))).toEqual(fixture.getrandbits32)
  })

  test('successive sample(range(n), k) calls match CPython (list and set algorithms)', () => {
    for (const s of fixture.samples) {
      const r = new PythonRandom(1234)
      expect(
        s.calls.map(() => r.sample(s.n, s.k)),
        `n=${s.n} k=${s.k}`,
      ).toEqual(s.calls)
    }
  })

  test('a sample larger than the population is refused, as CPython does', () => {
    expect(() => new PythonRandom(1).sample(2, 3)).toThrow(/larger than the population/)
  })
})
