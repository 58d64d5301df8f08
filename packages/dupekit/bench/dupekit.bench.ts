/**
 * @module `pnpm bench dupekit`: MinHash, exact hashing and Bloom filter throughput.
 *
 * Documents are 1 KiB of English-like text from a seeded generator (bench/corpus.ts).
 * Each metric is the median of several timed runs after a warm-up. Lines:
 * - minhash_{char,word}_docs_per_s: signatures at the defaults (286 permutations, 5-grams), one thread;
 * - minhash_{char,word}_docs_per_s_all_cores: the same through a MinHashPool on every core;
 * - minhash_{char,word}_updates_per_s_per_core: shingles × permutations per second, one thread, end to end
 *   (normalization and shingling included);
 * - minhash_{char,word}_{docs,updates}_per_cpu_s: the same per second of CPU time, which stays meaningful
 *   when other processes share the cores; minhash_{char,word}_pool_docs_per_cpu_s is the pool's rate per CPU
 *   second of all its threads, against one thread's (ratio near 1 = no pool overhead);
 * - minhash_kernel_updates_per_s: the SIMD kernel alone, against a scalar JavaScript loop (Math.imul on typed arrays);
 * - exact_{xxh3,xxh64}_mb_per_s: batch hashing of the documents as strings, against xxhash-wasm's h64 called
 *   once per document; exact_xxh64_bytes_mb_per_s the same on Uint8Arrays against h64Raw;
 * - lsh_cluster_docs_per_s: LshIndex (26 bands) plus union-find clustering over precomputed signatures;
 * - bloom_{inserts,lookups}_per_s: a filter sized for the keys at 1%.
 */
import { availableParallelism } from 'node:os'
import { emit, median, timeIt } from '@marin/rigging/bench'
import xxhashWasm from 'xxhash-wasm'
import { BloomFilter } from '../src/bloom.js'
import { xxh3Batch, xxh64Batch } from '../src/hash.js'
import { kernels } from '../src/internal/wasm.js'
import { LshIndex } from '../src/lsh.js'
import { MinHasher } from '../src/minhash.js'
import { MinHashPool } from '../src/minhash-pool.js'
import { UnionFind } from '../src/union-find.js'
import { makeCorpus, rng } from './corpus.js'

const bench = 'dupekit'
const RUNS = 7

/**
 * Median CPU seconds (user + system, whole process) of `fn`: on a machine shared with
 * other busy processes, wall time overstates the cost of single-threaded work, while
 * CPU time counts only the time this process actually ran on a core.
 */
async function cpuSeconds(fn: () => unknown, runs = RUNS): Promise<number> {
  await fn()
  const xs: number[] = []
  for (let i = 0; i < runs; i++) {
    const c0 = process.cpuUsage()
    await fn()
    const c = process.cpuUsage(c0)
    xs.push((c.user + c.system) / 1e6)
  }
  return median(xs)
}

/**
 * Median seconds of `ours` and of `base`, timed in alternation, so that load from
 * other processes on the machine falls on both alike and the ratio stays fair.
 */
async function timePair(ours: () => unknown, base: () => unknown, runs = RUNS * 3): Promise<[number, number]> {
  await timeIt(ours, { runs: 1, warmup: 2 })
  await timeIt(base, { runs: 1, warmup: 2 })
  const a: number[] = []
  const b: number[] = []
  for (let i = 0; i < runs; i++) {
    a.push(await timeIt(ours, { runs: 1, warmup: 0 }))
    b.push(await timeIt(base, { runs: 1, warmup: 0 }))
  }
  return [median(a), median(b)]
}
const log = (msg: string) => process.stderr.write(`dupekit bench: ${msg}\n`)

const docs = makeCorpus(4000, 1234)
const bytes = docs.reduce((s, d) => s + Buffer.byteLength(d), 0)
const cores = availableParallelism()
log(`${docs.length} documents, ${(bytes / docs.length).toFixed(0)} bytes each, ${cores} cores`)

// ---- MinHash, one thread and all cores
for (const shingle of ['char', 'word'] as const) {
  const mh = new MinHasher({ shingle })
  const out = new Uint32Array(mh.numPerm)
  const set = shingle === 'char' ? docs.slice(0, 2000) : docs
  let shingles = 0
  for (const d of set) shingles += mh.signatureInto(d, out, 0)
  const pool = new MinHashPool({ shingle, threads: cores })
  const [tp, t] = await timePair(
    () => pool.signatures(set),
    () => {
      for (const d of set) mh.signatureInto(d, out, 0)
    },
    RUNS,
  )
  // CPU time of the pool counts every worker thread: docs per CPU-second close to the
  // single-thread figure means the pool adds little overhead and scales with free cores.
  const poolCpu = await cpuSeconds(() => pool.signatures(set))
  await pool.close()
  emit({ bench, metric: `minhash_${shingle}_docs_per_s`, value: set.length / t, unit: 'docs/s' })
  emit({
    bench,
    metric: `minhash_${shingle}_updates_per_s_per_core`,
    value: (shingles * mh.numPerm) / t,
    unit: 'updates/s',
  })
  const cpu = await cpuSeconds(() => {
    for (const d of set) mh.signatureInto(d, out, 0)
  })
  emit({ bench, metric: `minhash_${shingle}_docs_per_cpu_s`, value: set.length / cpu, unit: 'docs/s' })
  emit({
    bench,
    metric: `minhash_${shingle}_updates_per_cpu_s`,
    value: (shingles * mh.numPerm) / cpu,
    unit: 'updates/s',
  })
  emit({
    bench,
    metric: `minhash_${shingle}_docs_per_s_all_cores`,
    value: set.length / tp,
    unit: 'docs/s',
    baseline: set.length / t,
  })
  emit({
    bench,
    metric: `minhash_${shingle}_pool_docs_per_cpu_s`,
    value: set.length / poolCpu,
    unit: 'docs/s',
    baseline: set.length / cpu,
  })
}

// ---- MinHash kernel alone vs a scalar JavaScript loop over the same shingle hashes
{
  const r = rng(5)
  const n = 1020 // the char 5-grams of a 1 KiB document
  const numPerm = 288
  const groups = numPerm / 4
  const hashes = Uint32Array.from({ length: n }, () => Math.floor(r() * 2 ** 32))
  const a = Uint32Array.from({ length: numPerm }, () => Math.floor(r() * 2 ** 32) | 1)
  const b = Uint32Array.from({ length: numPerm }, () => Math.floor(r() * 2 ** 32))
  const m = kernels()
  const params = m.base
  const sig = params + numPerm * 8
  const h = sig + numPerm * 4
  m.ensure(h + n * 4)
  m.u32.set(a, params >>> 2)
  m.u32.set(b, (params >>> 2) + numPerm)
  m.u32.set(hashes, h >>> 2)
  const reps = 200
  const js = new Uint32Array(numPerm)
  const scalar = () => {
    for (let p = 0; p < numPerm; p++) {
      const A = a[p]!
      const B = b[p]!
      let min = 0xffffffff
      for (let i = 0; i < n; i++) {
        const v = (Math.imul(A, hashes[i]!) + B) >>> 0
        if (v < min) min = v
      }
      js[p] = min
    }
  }
  const [tw, tj] = await timePair(
    () => {
      for (let i = 0; i < reps; i++) m.k.minhash(h, n, params, groups, sig)
    },
    () => {
      for (let i = 0; i < reps; i++) scalar()
    },
    RUNS,
  )
  const wasmSig = m.u32.subarray(sig >>> 2, (sig >>> 2) + numPerm)
  if (!wasmSig.every((v, i) => v === js[i])) throw new Error('kernel and scalar loop disagree')
  const updates = reps * n * numPerm
  emit({
    bench,
    metric: 'minhash_kernel_updates_per_s',
    value: updates / tw,
    unit: 'updates/s',
    baseline: updates / tj,
  })
}

// ---- Exact hashing, MB/s, against xxhash-wasm once per document
{
  const ref = await xxhashWasm()
  const mb = bytes / 1e6
  const perDoc = () => {
    for (const d of docs) ref.h64(d)
  }
  const [t64, tBase64] = await timePair(() => xxh64Batch(docs), perDoc)
  const [t3, tBase3] = await timePair(() => xxh3Batch(docs), perDoc)
  emit({ bench, metric: 'exact_xxh64_mb_per_s', value: mb / t64, unit: 'MB/s', baseline: mb / tBase64 })
  emit({ bench, metric: 'exact_xxh3_mb_per_s', value: mb / t3, unit: 'MB/s', baseline: mb / tBase3 })

  const raw = docs.map((d) => new TextEncoder().encode(d))
  const [t64Raw, tBaseRaw] = await timePair(
    () => xxh64Batch(raw),
    () => {
      for (const d of raw) ref.h64Raw(d)
    },
  )
  emit({ bench, metric: 'exact_xxh64_bytes_mb_per_s', value: mb / t64Raw, unit: 'MB/s', baseline: mb / tBaseRaw })
}

// ---- LSH banding and union-find over many signatures
{
  const n = 50_000
  const numPerm = 286
  const r = rng(77)
  // Random signatures, with every tenth document a copy of an earlier one (a duplicate).
  const sigs = new Uint32Array(n * numPerm)
  for (let i = 0; i < n; i++) {
    if (i % 10 === 9) sigs.copyWithin(i * numPerm, (i - 5) * numPerm, (i - 4) * numPerm)
    else for (let j = 0; j < numPerm; j++) sigs[i * numPerm + j] = Math.floor(r() * 2 ** 32)
  }
  let clusters = 0
  const t = await timeIt(
    () => {
      const lsh = new LshIndex()
      lsh.addAll(sigs)
      const uf = new UnionFind(n)
      uf.unionPairs(lsh.candidatePairs())
      clusters = uf.clusters().length
    },
    { runs: RUNS },
  )
  if (clusters !== n / 10) throw new Error(`expected ${n / 10} clusters, got ${clusters}`)
  emit({ bench, metric: 'lsh_cluster_docs_per_s', value: n / t, unit: 'docs/s' })
}

// ---- Bloom filter
{
  const n = 200_000
  const keys = Array.from({ length: n }, (_, i) => `https://example.org/page/${i}#${i * 2654435761}`)
  const others = Array.from({ length: n }, (_, i) => `https://example.net/other/${i}`)
  const tIns = await timeIt(
    () => {
      const bf = BloomFilter.create({ expectedItems: n, falsePositiveRate: 0.01 })
      for (const k of keys) bf.add(k)
    },
    { runs: RUNS },
  )
  const bf = BloomFilter.create({ expectedItems: n, falsePositiveRate: 0.01 })
  for (const k of keys) bf.add(k)
  let hits = 0
  const tLook = await timeIt(
    () => {
      hits = 0
      for (let i = 0; i < n; i++) {
        if (bf.has(keys[i]!)) hits++
        if (bf.has(others[i]!)) hits++
      }
    },
    { runs: RUNS },
  )
  emit({ bench, metric: 'bloom_inserts_per_s', value: n / tIns, unit: 'keys/s' })
  emit({ bench, metric: 'bloom_lookups_per_s', value: (2 * n) / tLook, unit: 'keys/s' })
  log(`bloom: ${hits - n} false positives in ${n} lookups of absent keys`)
}
