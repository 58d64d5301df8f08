import { expect, test } from 'vitest'
import { rng } from '../bench/corpus.js'
import { UnionFind } from './union-find.js'

test('the canonical member is the smallest id of the set', () => {
  const uf = new UnionFind(4)
  uf.union(9, 5)
  uf.union(5, 7)
  uf.union(20, 3)
  expect(uf.find(9)).toBe(5)
  expect(uf.find(7)).toBe(5)
  expect(uf.find(20)).toBe(3)
  expect(uf.union(7, 20)).toBe(3)
  expect(uf.find(9)).toBe(3)
  expect(uf.connected(5, 20)).toBe(true)
  expect(uf.connected(0, 20)).toBe(false)
  expect(uf.size).toBe(21)
  expect(uf.clusters()).toEqual([[3, 5, 7, 9, 20]])
  expect(Array.from(uf.canonicalIds(6))).toEqual([0, 1, 2, 3, 4, 3])
})

test('agrees with a naive labelling on random unions over 20,000 ids', () => {
  const n = 20_000
  const r = rng(99)
  const uf = new UnionFind()
  const label = Array.from({ length: n }, (_, i) => i)
  for (let e = 0; e < 15_000; e++) {
    const a = Math.floor(r() * n)
    const b = Math.floor(r() * n)
    uf.union(a, b)
    const la = label[a]!
    const lb = label[b]!
    if (la !== lb) {
      const keep = Math.min(la, lb)
      const drop = Math.max(la, lb)
      // Naive relabel only over the touched label: fine at test size.
      for (let i = 0; i < n; i++) if (label[i] === drop) label[i] = keep
    }
  }
  // A naive label is the minimum id of its component as well.
  expect(Array.from(uf.canonicalIds(n))).toEqual(label)
  const clusters = uf.clusters()
  for (const c of clusters) expect(c.every((id) => uf.find(id) === c[0])).toBe(true)
}, 60_000)

test('a long chain stays correct and fast enough for millions of ids', () => {
  const uf = new UnionFind()
  const n = 2_000_000
  for (let i = n - 1; i > 0; i--) uf.union(i, i - 1)
  expect(uf.find(n - 1)).toBe(0)
  expect(uf.clusters(2)).toHaveLength(1)
})

test('ids must be non-negative integers', () => {
  const uf = new UnionFind()
  expect(() => uf.find(-1)).toThrow(/UnionFind: id must be an integer in \[0, 4294967294\], got -1/)
  expect(() => uf.union(1.5, 2)).toThrow(/got 1.5/)
})
