import { expect, test } from 'vitest'
import { CORPUS_WORDS, makeCorpus, rng } from '../bench/corpus.js'
import { findDuplicateClusters } from './find-duplicates.js'
import { MinHasher } from './minhash.js'

/** Replaces `edits` random words of `text` with other words. */
function nearCopy(text: string, edits: number, r: () => number): string {
  const words = text.split(' ')
  for (let e = 0; e < edits; e++) {
    const i = Math.floor(r() * words.length)
    words[i] = CORPUS_WORDS[Math.floor(r() * CORPUS_WORDS.length)]! + 'x'
  }
  return words.join(' ')
}

/** A corpus of unique documents with planted exact and near-duplicate clusters at known ids. */
function plantedCorpus(edits = 3) {
  const r = rng(2024)
  const base = makeCorpus(400, 77)
  const texts: string[] = [...base]
  const planted: number[][] = []
  // 25 exact clusters: copies that differ only in case and whitespace.
  for (let c = 0; c < 25; c++) {
    const src = c * 7
    const ids = [src]
    for (let k = 0; k < 1 + (c % 3); k++) {
      ids.push(texts.length)
      texts.push(k % 2 ? base[src]!.toUpperCase() : base[src]!.replace(/ /g, '  \n'))
    }
    planted.push(ids)
  }
  // 25 near clusters: a few words changed per copy. Three edits leave char 5-gram
  // Jaccard near 0.94 (LSH recall ≈ 1 - 1e-9 at 26×11); word 5-grams lose about 5
  // shingles per edit, so the word test uses one edit (Jaccard ≈ 0.95).
  for (let c = 0; c < 25; c++) {
    const src = 200 + c * 5
    const ids = [src]
    for (let k = 0; k < 1 + (c % 4); k++) {
      ids.push(texts.length)
      texts.push(nearCopy(base[src]!, edits, r))
    }
    planted.push(ids)
  }
  // Shuffle nothing: ids stay known; the canonical member is the original (smallest id).
  return { texts, planted: planted.map((c) => c.sort((a, b) => a - b)).sort((a, b) => a[0]! - b[0]!) }
}

test('all planted exact and near-duplicate clusters are recovered, and nothing else', () => {
  const { texts, planted } = plantedCorpus()
  const { clusters, canonical, candidatePairs } = findDuplicateClusters(texts)
  expect(clusters).toEqual(planted)
  for (const c of planted) for (const id of c) expect(canonical[id]).toBe(c[0])
  expect(candidatePairs).toBeGreaterThan(0)
  const keep = texts.filter((_, i) => canonical[i] === i)
  expect(keep).toHaveLength(400)
})

test('word shingles and precomputed signatures give the same clusters', () => {
  const { texts, planted } = plantedCorpus(1)
  const sigs = new MinHasher({ shingle: 'word' }).signatures(texts)
  expect(findDuplicateClusters(texts, { shingle: 'word', signatures: sigs }).clusters).toEqual(planted)
})

test('exact-only grouping when fuzzy candidates are verified above 1', () => {
  const texts = ['Same text here.', 'same   TEXT here.', 'same text here!', 'other']
  // verifyThreshold > 1 rejects every fuzzy pair: only exact (normalized) matches remain.
  expect(findDuplicateClusters(texts, { verifyThreshold: 1.01 }).clusters).toEqual([[0, 1]])
  expect(findDuplicateClusters(texts, { exact: false, verifyThreshold: 1.01 }).clusters).toEqual([])
  expect(findDuplicateClusters([]).clusters).toEqual([])
})

test('signatures of the wrong shape are rejected', () => {
  expect(() => findDuplicateClusters(['a', 'b'], { signatures: new Uint32Array(286) })).toThrow(
    /signatures has 286 slots, expected 2 texts × 286 permutations/,
  )
})
