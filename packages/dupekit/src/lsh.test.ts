import { describe, expect, test } from 'vitest'
import { LshIndex, lshProbability, lshThreshold } from './lsh.js'
import { MinHasher } from './minhash.js'
import { UnionFind } from './union-find.js'

/** Token-set texts with exact Jaccard common/union (1-word shingles). */
function pair(union: number, common: number, tag: string): [string, string] {
  const onlyA = Math.floor((union - common) / 2)
  const shared = Array.from({ length: common }, (_, i) => `s${tag}q${i}`)
  const a = [...shared, ...Array.from({ length: onlyA }, (_, i) => `a${tag}q${i}`)]
  const b = [...shared, ...Array.from({ length: union - common - onlyA }, (_, i) => `b${tag}q${i}`)]
  return [a.join(' '), b.join(' ')]
}

describe('band formula', () => {
  test('lshProbability is 1-(1-s^r)^b', () => {
    expect(lshProbability(0, 26, 11)).toBe(0)
    expect(lshProbability(1, 26, 11)).toBe(1)
    expect(lshProbability(0.8, 26, 11)).toBeCloseTo(1 - (1 - 0.8 ** 11) ** 26, 12)
    expect(lshThreshold(26, 11)).toBeCloseTo(0.7437, 3)
  })
})

describe.each([
  [26, 11],
  [13, 11],
  [20, 5],
])('LSH recall follows the band formula with %i bands × %i rows (statistical)', (bands, rows) => {
  // A pair of Jaccard s becomes a candidate with probability p = 1-(1-s^r)^b. Over
  // N independent pairs the found fraction has standard deviation sqrt(p(1-p)/N);
  // each point must be within 4 of those (plus 1/N for the discreteness of a count).
  const numPerm = bands * rows
  const union = 100
  const N = 120
  const mh = new MinHasher({ numPerm, shingle: 'word', ngram: 1, normalize: false })
  const sims = [0.3, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95]

  test.each(sims)('s = %f', (s) => {
    const common = Math.round(s * union)
    const J = common / union
    const lsh = new LshIndex({ numPerm, numBands: bands })
    for (let i = 0; i < N; i++) {
      const [a, b] = pair(union, common, `${bands}-${s}-${i}`)
      lsh.add(2 * i, mh.signature(a))
      lsh.add(2 * i + 1, mh.signature(b))
    }
    const found = new Set<string>()
    const pairs = lsh.candidatePairs()
    for (let i = 0; i < pairs.length; i += 2) found.add(`${pairs[i]},${pairs[i + 1]}`)
    let hits = 0
    for (let i = 0; i < N; i++) if (found.has(`${2 * i},${2 * i + 1}`)) hits++
    const p = lshProbability(J, bands, rows)
    const tol = 4 * Math.sqrt((p * (1 - p)) / N) + 1 / N
    expect(Math.abs(hits / N - p), `found ${hits}/${N}, formula ${p.toFixed(3)}`).toBeLessThanOrEqual(tol)
    // Unrelated documents (disjoint token sets) are never paired.
    for (let i = 0; i < pairs.length; i += 2) expect(pairs[i]! >> 1).toBe(pairs[i + 1]! >> 1)
  })
})

describe('LshIndex', () => {
  test('a bucket of m identical documents gives m-1 pairs to its first member', () => {
    const mh = new MinHasher()
    const lsh = new LshIndex()
    const sig = mh.signature('identical text for every document in this bucket')
    for (let id = 10; id < 15; id++) lsh.add(id, sig)
    expect(Array.from(lsh.candidatePairs())).toEqual([10, 11, 10, 12, 10, 13, 10, 14])
    expect(lsh.size).toBe(5)
  })

  test('addAll takes flat signatures and pairs connect into one component', () => {
    const mh = new MinHasher()
    const texts = [
      'alpha beta gamma delta epsilon zeta',
      'alpha beta gamma delta epsilon zeta',
      'something else entirely, nothing alike',
    ]
    const lsh = new LshIndex()
    lsh.addAll(mh.signatures(texts), 100)
    const uf = new UnionFind()
    uf.unionPairs(lsh.candidatePairs())
    expect(uf.find(101)).toBe(100)
    expect(uf.find(102)).toBe(102)
  })

  test('bad shapes are rejected with what to do', () => {
    expect(() => new LshIndex({ numPerm: 286, numBands: 25 })).toThrow(
      /numPerm \(286\) must be a positive multiple of numBands \(25\)/,
    )
    expect(() => new LshIndex().add(1, new Uint32Array(10))).toThrow(/signature has 10 slots from offset 0, need 286/)
    expect(() => new LshIndex().add(-1, new Uint32Array(286))).toThrow(/id must be an integer/)
  })
})

test('matches a naive bucket map over many documents, through table growth', () => {
  // 6000 documents × 20 bands = 120,000 buckets: the table grows from 65,536 slots twice.
  const numPerm = 40
  const numBands = 20
  const rows = 2
  const n = 6000
  let s = 7
  const next = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0), s)
  const sigs = new Uint32Array(n * numPerm)
  // Small slot values make many bands collide, so there are plenty of real buckets.
  for (let i = 0; i < sigs.length; i++) sigs[i] = next() % 300
  const lsh = new LshIndex({ numPerm, numBands })
  lsh.addAll(sigs)
  const want: number[] = []
  const first = new Map<string, number>()
  for (let id = 0; id < n; id++) {
    const partners: number[] = []
    for (let b = 0; b < numBands; b++) {
      const key = `${b}:${Array.from(sigs.subarray(id * numPerm + b * rows, id * numPerm + (b + 1) * rows)).join(',')}`
      const f = first.get(key)
      if (f === undefined) first.set(key, id)
      else if (!partners.includes(f)) partners.push(f)
    }
    for (const f of partners) want.push(f, id)
  }
  expect(want.length).toBeGreaterThan(1000)
  expect(Array.from(lsh.candidatePairs())).toEqual(want)
})
