import { expect, test } from 'vitest'
import { sortedOrder } from './buckets.js'

test('sortedOrder orders records by key then position, ties on the packed bits included', () => {
  // 5,000 records; many share key0 and the high bits of key1, some share whole keys
  const n = 5000
  const r = new Uint32Array(n * 4)
  let s = 1
  const next = () => {
    s = Math.imul(s ^ (s >>> 15), 0x2c1b3c6d) + 0x9e3779b9
    return s >>> 0
  }
  for (let i = 0; i < n; i++) {
    r[i * 4] = next() % 7
    r[i * 4 + 1] = (next() % 3) * 0x10000000 + (next() % 5)
    r[i * 4 + 2] = next() % 2
    r[i * 4 + 3] = next() % 1000
  }
  const all = Array.from({ length: n }, (_, i) => i)
  const cmp = (x: number, y: number) =>
    r[x * 4]! - r[y * 4]! ||
    r[x * 4 + 1]! - r[y * 4 + 1]! ||
    r[x * 4 + 2]! - r[y * 4 + 2]! ||
    r[x * 4 + 3]! - r[y * 4 + 3]!
  const key = (i: number) => [...r.subarray(i * 4, i * 4 + 4)].join(',')
  expect([...sortedOrder(r, () => true)].map(key)).toEqual([...all].sort(cmp).map(key))
  const even = (i: number) => i % 2 === 0
  expect([...sortedOrder(r, even)].map(key)).toEqual(all.filter(even).sort(cmp).map(key))
})
