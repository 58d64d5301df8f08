/**
 * @module Out-of-core document dedup, the shape datatrove gives it: worker processes sign
 * each input shard (exact keys and MinHash band keys into bucket files in the scratch: a local folder, or a
 * storage URL for workers on other hosts, `scratch.ts`),
 * then resolve each bucket (sort by key, pair each copy with the first document of its
 * key); the coordinator merges the pairs (exact copies into a bitmap, band pairs into
 * clusters by union-find). No process holds the corpus: a worker holds a batch of
 * documents or one bucket, and the coordinator a bit per document plus the documents
 * that have a duplicate. The decisions equal the in-memory path's: the first document
 * of each exact group, then of each connected component of LSH candidates among the
 * exact-unique documents, in shard order, is kept.
 */
import { Dataset, ParquetReader, type ZephyrContext } from '@marin/zephyr'
import { DatakitError } from '../errors.js'
import { type BucketResult, RESOLVE_BUCKETS } from './buckets.js'
import type { DedupLevelReport, DedupReport } from './dedup.js'
import { openScratch, type Scratch } from './scratch.js'
import { SIGN_SHARDS, type SignResult } from './signatures.js'

export type OutOfCoreOptions = {
  /** Buckets the signatures are shuffled into. @default enough for about 64 MiB of records each */
  readonly buckets?: number
  /**
   * Where the signatures, buckets and pairs go: a storage URL (`s3://bucket/prefix`) that every worker reaches, for
   * workers on other hosts (no disk shared). @default a folder in the store's work folder (workers must then share
   * this machine's disk)
   */
  readonly scratch?: string
}

/** What a run out of core did, beside the report (which equals the in-memory path's). */
export type OutOfCoreStats = {
  readonly shards: number
  readonly buckets: number
  /** Bytes of exact and band records written by the map side. */
  readonly signatureBytes: number
  /** Exact pairs and band candidate pairs the buckets produced. */
  readonly exactPairs: number
  readonly candidatePairs: number
  /** Wall-clock seconds of each phase: signing the shards, resolving exact and band buckets, merging. */
  readonly seconds: { sign: number; exact: number; band: number; merge: number }
}

/** The document levels' decisions, as the in-memory path makes them. */
export type DocumentPasses = {
  readonly keep: Uint8Array
  readonly shardStart: readonly number[]
  readonly exactDuplicates: number
  readonly fuzzyClusters: number
  readonly fuzzyDuplicates: number
  readonly levels: DedupLevelReport[]
  readonly exactExamples: DedupReport['exampleClusters']
  readonly fuzzyExamples: DedupReport['exampleClusters']
}

export type OutOfCoreArgs = {
  readonly shards: readonly string[]
  readonly exact: boolean
  readonly fuzzy: boolean
  readonly mh: { numPerm: number; numBands: number; ngram: number; seed: number }
  readonly maxExamples: number
  readonly context: ZephyrContext
  /** Scratch: a local folder or a storage URL (its files are removed at the end). */
  readonly dir: string
  readonly options: OutOfCoreOptions
}

const RECORD = 16
const BUCKET_BYTES = 64 * 2 ** 20

/** Union-find over the documents that appear in a pair, with the smallest member as root. */
class SparseUnionFind {
  private readonly parent = new Map<number, number>()

  find(x: number): number {
    let r = x
    for (let p = this.parent.get(r); p !== undefined && p !== r; p = this.parent.get(r)) r = p
    // path compression
    for (let y = x; y !== r; ) {
      const next = this.parent.get(y)!
      this.parent.set(y, r)
      y = next
    }
    return r
  }

  union(a: number, b: number): void {
    if (!this.parent.has(a)) this.parent.set(a, a)
    if (!this.parent.has(b)) this.parent.set(b, b)
    const ra = this.find(a)
    const rb = this.find(b)
    if (ra < rb) this.parent.set(rb, ra)
    else if (rb < ra) this.parent.set(ra, rb)
  }

  /** Components of two or more members, each ascending, ordered by their smallest member. */
  clusters(): number[][] {
    const byRoot = new Map<number, number[]>()
    for (const x of this.parent.keys()) {
      const r = this.find(x)
      let c = byRoot.get(r)
      if (c === undefined) byRoot.set(r, (c = []))
      c.push(x)
    }
    return [...byRoot.entries()]
      .sort((p, q) => p[0] - q[0])
      .map(([, c]) => c.sort((p, q) => p - q))
      .filter((c) => c.length > 1)
  }
}

async function* pairsOf(scratch: Scratch, name: string): AsyncGenerator<[number, number]> {
  const b = await scratch.read(name)
  if (b === undefined) throw new DatakitError('INVALID_ARGUMENT', `dedup: ${name} is missing from the scratch`)
  const u = new Uint32Array(b.buffer, b.byteOffset, b.length / 4)
  for (let i = 0; i < u.length; i += 2) yield [u[i]!, u[i + 1]!]
}

const hasBit = (bits: Uint8Array, i: number): boolean => (bits[i >>> 3]! & (1 << (i & 7))) !== 0

/** Ids and the first 100 characters of the documents at `positions`, read from the shards. */
async function snippets(
  shards: readonly string[],
  shardStart: readonly number[],
  positions: ReadonlySet<number>,
): Promise<Map<number, { id: string; text: string }>> {
  const out = new Map<number, { id: string; text: string }>()
  for (let s = 0; s < shards.length; s++) {
    const end = s + 1 < shards.length ? shardStart[s + 1]! : Number.POSITIVE_INFINITY
    const wanted = [...positions].filter((p) => p >= shardStart[s]! && p < end)
    if (wanted.length === 0) continue
    const last = Math.max(...wanted)
    let pos = shardStart[s]!
    for await (const row of new ParquetReader({ path: shards[s]!, columns: ['id', 'text'] })) {
      const r = row as { id: string; text: string }
      if (positions.has(pos)) out.set(pos, { id: r.id, text: r.text.slice(0, 100) })
      if (pos++ >= last) break
    }
  }
  return out
}

export async function documentPassesOutOfCore(a: OutOfCoreArgs): Promise<DocumentPasses & { stats: OutOfCoreStats }> {
  const { shards, exact, fuzzy, mh, context } = a
  // where each shard starts, from the Parquet footers
  const shardStart: number[] = []
  let n = 0
  for (const path of shards) {
    shardStart.push(n)
    const reader = new ParquetReader({ path })
    n += Number((await reader.metadata()).num_rows)
    await reader.close()
  }
  if (n > 0xfffffffe)
    throw new DatakitError('INVALID_ARGUMENT', `dedup: ${n} documents; out-of-core dedup numbers them in 32 bits`)
  const perDoc = (exact ? 1 : 0) + (fuzzy ? mh.numBands : 0)
  const buckets = a.options.buckets ?? Math.max(1, Math.ceil((n * perDoc * RECORD) / BUCKET_BYTES))
  if (!Number.isInteger(buckets) || buckets < 1)
    throw new DatakitError('INVALID_ARGUMENT', `dedup: outOfCore.buckets must be a positive integer, got ${buckets}`)
  const scratch = await openScratch(a.dir)
  await scratch.clear()
  const range = (k: number) => Array.from({ length: k }, (_, i) => i)
  const seconds = { sign: 0, exact: 0, band: 0, merge: 0 }
  let t = performance.now()
  const lap = (phase: keyof typeof seconds): void => {
    const now = performance.now()
    seconds[phase] += (now - t) / 1000
    t = now
  }
  try {
    // 1. map: signatures per shard, into bucket files
    const signArgs = { shards: [...shards], shardStart, dir: a.dir, buckets, exact, fuzzy, ...mh }
    const signed = (
      await context.execute(
        Dataset.fromList(range(shards.length), { numShards: shards.length }).mapShard(SIGN_SHARDS, { args: signArgs }),
      )
    ).results as SignResult[]
    const signatureBytes = signed.reduce((s, r) => s + r.signatureBytes, 0)
    lap('sign')
    const resolve = async (kind: 'exact' | 'band', exactRemoved?: Uint8Array): Promise<BucketResult[]> =>
      (
        await context.execute(
          Dataset.fromList(range(buckets), { numShards: buckets }).mapShard(RESOLVE_BUCKETS, {
            args: { dir: a.dir, kind, shards: shards.length, ...(exactRemoved ? { exactRemoved } : {}) },
          }),
        )
      ).results as BucketResult[]

    // 2. exact: each later copy of a key is removed; the first groups (by first member) are examples
    const exactRemoved = new Uint8Array(Math.ceil(n / 8))
    let exactDuplicates = 0
    let exactPairs = 0
    const exactGroups = new Map<number, number[]>()
    if (exact) {
      await resolve('exact')
      lap('exact')
      for (let b = 0; b < buckets; b++)
        for await (const [first, copy] of pairsOf(scratch, `exact-pairs-${b}.bin`)) {
          exactPairs++
          exactRemoved[copy >>> 3]! |= 1 << (copy & 7)
          exactDuplicates++
          const g = exactGroups.get(first)
          if (g) g.push(copy)
          else if (exactGroups.size < a.maxExamples) exactGroups.set(first, [first, copy])
          else {
            // keep the groups with the smallest first members
            const largest = Math.max(...exactGroups.keys())
            if (first < largest) {
              exactGroups.delete(largest)
              exactGroups.set(first, [first, copy])
            }
          }
        }
    }
    lap('merge')
    // 3. fuzzy: band pairs among the exact-unique documents, merged into clusters
    let candidatePairs = 0
    const fuzzyRemoved = new Uint8Array(Math.ceil(n / 8))
    const clusters: number[][] = []
    if (fuzzy && n - exactDuplicates > 1) {
      await resolve('band', exactRemoved)
      lap('band')
      const uf = new SparseUnionFind()
      for (let b = 0; b < buckets; b++)
        for await (const [first, other] of pairsOf(scratch, `edges-${b}.bin`)) {
          candidatePairs++
          uf.union(first, other)
        }
      for (const c of uf.clusters()) {
        clusters.push(c)
        for (const i of c.slice(1)) fuzzyRemoved[i >>> 3]! |= 1 << (i & 7)
      }
    }
    const fuzzyDuplicates = clusters.reduce((s, c) => s + c.length - 1, 0)

    // 4. what each level removed, in bytes, from the lengths the map side wrote
    const keep = new Uint8Array(n).fill(1)
    let exactBytes = 0
    let fuzzyBytes = 0
    for (let s = 0; s < shards.length; s++) {
      const b = await scratch.read(`len-${s}.bin`)
      if (b === undefined) throw new DatakitError('INVALID_ARGUMENT', `dedup: len-${s}.bin is missing from the scratch`)
      const len = new Uint32Array(b.buffer, b.byteOffset, b.length / 4)
      for (let i = 0; i < len.length; i++) {
        const pos = shardStart[s]! + i
        if (hasBit(exactRemoved, pos)) {
          keep[pos] = 0
          exactBytes += len[i]!
        } else if (hasBit(fuzzyRemoved, pos)) {
          keep[pos] = 0
          fuzzyBytes += len[i]!
        }
      }
    }
    const levels: DedupLevelReport[] = []
    const level = (l: 'exact' | 'fuzzy', of: number, removed: number, bytesRemoved: number): DedupLevelReport => ({
      level: l,
      unit: 'documents',
      of,
      removed,
      bytesRemoved,
      documentsEmptied: 0,
    })
    if (exact) levels.push(level('exact', n, exactDuplicates, exactBytes))
    if (fuzzy) levels.push(level('fuzzy', n - exactDuplicates, fuzzyDuplicates, fuzzyBytes))

    // 5. examples: ids and snippets of the first groups of each kind
    const groups = [...exactGroups.entries()]
      .sort((p, q) => p[0] - q[0])
      .map(([, g]) => [g[0]!, ...g.slice(1).sort((p, q) => p - q)])
    const fuzzyShown = clusters.slice(0, a.maxExamples)
    const shown = await snippets(shards, shardStart, new Set([...groups, ...fuzzyShown].flat()))
    lap('merge')
    const example = (kind: 'exact' | 'fuzzy', g: number[]) => ({
      kind,
      ids: g.map((i) => shown.get(i)!.id),
      texts: g.map((i) => shown.get(i)!.text),
    })
    return {
      keep,
      shardStart,
      exactDuplicates,
      fuzzyClusters: clusters.length,
      fuzzyDuplicates,
      levels,
      exactExamples: groups.map((g) => example('exact', g)),
      fuzzyExamples: fuzzyShown.map((g) => example('fuzzy', g)),
      stats: { shards: shards.length, buckets, signatureBytes, exactPairs, candidatePairs, seconds },
    }
  } finally {
    await scratch.remove()
  }
}
