/**
 * @module Benchmarks of finestore: put/get throughput of 256 MiB against a plain
 * `fs` stream copy of the same bytes, commits per second, and catalog query
 * latency with 100,000 versions. Progress goes to stderr, results to stdout.
 */
import { createHash, randomBytes } from 'node:crypto'
import { createReadStream, createWriteStream, mkdtempSync, openSync, closeSync, fsyncSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pipeline } from 'node:stream/promises'
import { pathToFileURL } from 'node:url'
import { emit, median, timeIt } from '@marin/rigging/bench'
import { Catalog } from '../src/catalog.js'
import type { Manifest } from '../src/manifest.js'
import { openStore } from '../src/store.js'

const BENCH = 'finestore'
const MIB = 1 << 20
const SIZE = Number(process.env.FINESTORE_BENCH_MIB ?? 256) * MIB
const RUNS = 5
const log = (s: string) => process.stderr.write(`[finestore bench] ${s}\n`)

const root = mkdtempSync(join(tmpdir(), 'finestore-bench-'))
process.on('exit', () => rmSync(root, { recursive: true, force: true }))

async function plainCopy(src: string, dst: string, fsync = false): Promise<void> {
  await pipeline(createReadStream(src, { highWaterMark: MIB }), createWriteStream(dst, { highWaterMark: MIB }))
  if (fsync) {
    const fd = openSync(dst, 'r')
    fsyncSync(fd)
    closeSync(fd)
  }
}

async function sha256File(file: string): Promise<string> {
  const h = createHash('sha256')
  for await (const chunk of createReadStream(file, { highWaterMark: 4 * MIB })) h.update(chunk as Buffer)
  return h.digest('hex')
}

async function putGet(): Promise<void> {
  const src = join(root, 'source.bin')
  writeFileSync(src, randomBytes(SIZE))
  const mb = SIZE / MIB
  log(`put/get of ${mb} MiB, ${RUNS} runs each`)
  let n = 0
  const storeDir = () => join(root, `store-${n}`)
  const freshStore = async (fsync = true) => openStore({ url: pathToFileURL(join(root, `store-${++n}`)).href, catalog: ':memory:', fsync })

  const putTimes: number[] = []
  const putNoSyncTimes: number[] = []
  const copyTimes: number[] = []
  const fsyncCopyTimes: number[] = []
  const hashTimes: number[] = []
  // Interleave ours and the baselines so that noise from the shared machine hits both alike.
  for (let i = 0; i < RUNS; i++) {
    const store = await freshStore()
    let t0 = performance.now()
    await store.putBlob({ file: src })
    putTimes.push((performance.now() - t0) / 1000)
    store.close()
    rmSync(storeDir(), { recursive: true, force: true })
    const scratch = await freshStore(false)
    t0 = performance.now()
    await scratch.putBlob({ file: src })
    putNoSyncTimes.push((performance.now() - t0) / 1000)
    scratch.close()
    rmSync(storeDir(), { recursive: true, force: true })
    const dst = join(root, 'copy.bin')
    t0 = performance.now()
    await plainCopy(src, dst)
    copyTimes.push((performance.now() - t0) / 1000)
    rmSync(dst)
    t0 = performance.now()
    await plainCopy(src, dst, true)
    fsyncCopyTimes.push((performance.now() - t0) / 1000)
    rmSync(dst)
    t0 = performance.now()
    await sha256File(src)
    hashTimes.push((performance.now() - t0) / 1000)
  }
  // The bound on put and get: sha256 alone over the same bytes, against the same plain copy.
  emit({ bench: BENCH, metric: 'sha256_only_mb_per_s', value: mb / median(hashTimes), unit: 'MB/s', baseline: mb / median(copyTimes) })
  emit({ bench: BENCH, metric: 'put_mb_per_s', value: mb / median(putTimes), unit: 'MB/s', baseline: mb / median(copyTimes) })
  emit({ bench: BENCH, metric: 'put_no_fsync_mb_per_s', value: mb / median(putNoSyncTimes), unit: 'MB/s', baseline: mb / median(copyTimes) })
  emit({ bench: BENCH, metric: 'put_mb_per_s_vs_fsynced_copy', value: mb / median(putTimes), unit: 'MB/s', baseline: mb / median(fsyncCopyTimes) })

  const store = await freshStore()
  const c = await store.commit('bench/big', async (txn) => void (await txn.put('data.bin', { file: src })))
  const view = await store.open(c.ref)
  const blobFile = store.storage.localPath(`blobs/sha256/${c.manifest.files['data.bin']!.blob.slice(0, 2)}/${c.manifest.files['data.bin']!.blob}`)!
  const getTimes: number[] = []
  const baseTimes: number[] = []
  for (let i = 0; i < RUNS; i++) {
    const dst = join(root, 'got.bin')
    let t0 = performance.now()
    await view.copyTo('data.bin', dst)
    getTimes.push((performance.now() - t0) / 1000)
    rmSync(dst)
    t0 = performance.now()
    await plainCopy(blobFile, dst)
    baseTimes.push((performance.now() - t0) / 1000)
    rmSync(dst)
  }
  emit({ bench: BENCH, metric: 'get_mb_per_s', value: mb / median(getTimes), unit: 'MB/s', baseline: mb / median(baseTimes) })
  const inMemory = await timeIt(() => view.read('data.bin'), { runs: 3 })
  emit({ bench: BENCH, metric: 'get_into_memory_mb_per_s', value: mb / inMemory, unit: 'MB/s' })
  store.close()
  rmSync(src)
}

async function commits(): Promise<void> {
  for (const kind of ['file', 'memory'] as const) {
    const url = kind === 'file' ? pathToFileURL(join(root, 'commits')).href : 'memory://finestore-bench-commits'
    const store = await openStore({ url, ...(kind === 'memory' ? { catalog: ':memory:' } : {}) })
    const n = kind === 'file' ? 200 : 1000
    let i = 0
    const one = async () => {
      await store.commit('bench/commits', async (txn) => void (await txn.put('f', `commit ${i++}`)), { metadata: { i } })
    }
    for (let w = 0; w < 10; w++) await one()
    const t0 = performance.now()
    for (let k = 0; k < n; k++) await one()
    const s = (performance.now() - t0) / 1000
    emit({ bench: BENCH, metric: `commits_per_s_${kind}`, value: n / s, unit: 'commits/s' })
    store.close()
  }
}

async function catalogQueries(): Promise<void> {
  const ARTIFACTS = 1000
  const PER = 100
  log(`catalog with ${ARTIFACTS * PER} versions`)
  const catalog = new Catalog(join(root, 'catalog.sqlite'))
  const blob = '0'.repeat(64)
  const batch: Manifest[] = []
  for (let a = 0; a < ARTIFACTS; a++) {
    const artifact = `${['datasets', 'tokens', 'models', 'evals'][a % 4]}/a${a}`
    for (let v = 1; v <= PER; v++) {
      batch.push({
        format: 1,
        artifact,
        version: v,
        parent: v === 1 ? null : v - 1,
        kind: artifact.split('/')[0]!,
        createdAt: new Date(1_700_000_000_000 + a * PER + v).toISOString(),
        files: { 'part-0': { blob, size: 1000 + v } },
        metadata: { docs: a * PER + v, lang: a % 2 ? 'en' : 'fr', stats: { tokens: v * 1000 } },
        config: { seed: v },
        // A chain through artifacts: each version derives from the previous artifact's same version.
        lineage: a === 0 ? [] : [{ artifact: `${['datasets', 'tokens', 'models', 'evals'][(a - 1) % 4]}/a${a - 1}`, version: v }],
      })
    }
    if (batch.length >= 10_000) catalog.indexVersions(batch.splice(0))
  }
  catalog.indexVersions(batch)
  const q = async (metric: string, fn: () => unknown, runs = 21) => {
    const times: number[] = []
    for (let i = 0; i < 3; i++) fn()
    for (let i = 0; i < runs; i++) {
      const t0 = performance.now()
      fn()
      times.push(performance.now() - t0)
    }
    emit({ bench: BENCH, metric, value: median(times), unit: 'ms' })
  }
  await q('catalog_list_artifacts_ms', () => catalog.artifacts())
  await q('catalog_versions_of_artifact_ms', () => catalog.versions('models/a502'))
  await q('catalog_search_metadata_eq_ms', () => catalog.search({ metadata: { docs: 50_050 } }))
  await q('catalog_search_metadata_range_ms', () => catalog.search({ kind: 'models', metadata: { 'stats.tokens': { gte: 99_000 }, lang: 'en' }, limit: 100 }))
  await q('catalog_ancestors_depth_999_ms', () => catalog.ancestors('evals/a999', 50), 5)
  await q('catalog_descendants_depth_10_ms', () => catalog.descendants('models/a990', 50))
  catalog.close()
}

await putGet()
await commits()
await catalogQueries()
