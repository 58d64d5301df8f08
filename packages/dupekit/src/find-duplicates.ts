/**
 * @module Exact and fuzzy duplicate clusters of an in-memory corpus, end to end:
 * exact keys, MinHash signatures, LSH candidate pairs and union-find, in time
 * linear in the corpus (no pairwise comparison of all documents).
 *
 * @example
 * const { clusters, canonical } = findDuplicateClusters(texts)
 * const keep = texts.filter((_, i) => canonical[i] === i)
 */
import { DupekitError } from './errors.js'
import { exactKeys } from './exact-key.js'
import { LshIndex } from './lsh.js'
import { estimateJaccard, MINHASH_DEFAULTS, MinHasher, type MinHashOptions } from './minhash.js'
import { UnionFind } from './union-find.js'

export type FindDuplicatesOptions = MinHashOptions & {
  /** LSH bands; numPerm must be a multiple. @default 26 */
  numBands?: number
  /**
   * Keep an LSH candidate pair only if its estimated Jaccard similarity is at least
   * this; `undefined` keeps every candidate (like Marin's fuzzy dedup). Candidates
   * pair each document with its buckets' first members, so verification is against
   * those. @default undefined
   */
  verifyThreshold?: number
  /** Also group documents whose normalized texts are identical. @default true */
  exact?: boolean
  /** Precomputed signatures (flat, numPerm per document), e.g. from a MinHashPool. */
  signatures?: Uint32Array
}

export type DuplicateClusters = {
  /** Clusters of two or more documents, ids ascending; `[0]` is the canonical member. */
  clusters: number[][]
  /** `canonical[i]`: the smallest id in document i's cluster (i itself when unique). */
  canonical: Uint32Array
  /** LSH candidate pairs considered. */
  candidatePairs: number
}

export function findDuplicateClusters(
  texts: readonly string[],
  options: FindDuplicatesOptions = {},
): DuplicateClusters {
  const { numBands = MINHASH_DEFAULTS.numBands, verifyThreshold, exact = true, signatures, ...mh } = options
  const hasher = new MinHasher(mh)
  const k = hasher.numPerm
  const uf = new UnionFind(texts.length)
  if (texts.length > 0) uf.find(texts.length - 1)
  if (exact) {
    const first = new Map<string, number>()
    exactKeys(texts, mh.normalize === false ? {} : mh.normalize).forEach((key, i) => {
      const j = first.get(key)
      if (j === undefined) first.set(key, i)
      else uf.union(j, i)
    })
  }
  if (signatures !== undefined && signatures.length !== texts.length * k) {
    throw new DupekitError(
      'INVALID_ARGUMENT',
      `findDuplicateClusters: signatures has ${signatures.length} ` +
        `slots, expected ${texts.length} texts × ${k} permutations; ` +
        `compute them with the same numPerm`,
    )
  }
  const sigs = signatures ?? hasher.signatures(texts)
  const lsh = new LshIndex({ numPerm: k, numBands })
  lsh.addAll(sigs)
  const pairs = lsh.candidatePairs()
  for (let i = 0; i < pairs.length; i += 2) {
    const a = pairs[i]!
    const b = pairs[i + 1]!
    if (verifyThreshold !== undefined) {
      const j = estimateJaccard(sigs.subarray(a * k, (a + 1) * k), sigs.subarray(b * k, (b + 1) * k))
      if (j < verifyThreshold) continue
    }
    uf.union(a, b)
  }
  return { clusters: uf.clusters(), canonical: uf.canonicalIds(texts.length), candidatePairs: pairs.length / 2 }
}
