/**
 * @module A datakit driver for the dedup-across-hosts test (`dedup/hosts.test.ts`): run on host A
 * (`ip netns exec`), with the object store reached through the S3 SDK's environment (`AWS_ENDPOINT_URL`, …)
 * and the iris controller given.
 * It writes a planted corpus (Brown paragraphs with exact and near copies) as Parquet shards into the object store,
 * decides the exact and MinHash levels in memory here, then out of core with its zephyr workers as fray actors on
 * the iris cluster's hosts, signatures, buckets and pairs in the object store. argv[2] is a JSON
 * `DedupHostsConfig`; it prints one JSON line per step (`{"step": …}`) and exits.
 */
import { spawnSync } from 'node:child_process'
import { MINHASH_DEFAULTS } from '@marin/dupekit'
import { FrayIrisClient } from '@marin/fray'
import { openStorage } from '@marin/rigging'
import { Dataset, ZephyrContext } from '@marin/zephyr'
import { brownParagraphs } from './brown.js'
import { documentPassesInMemory } from '../dedup/dedup.js'
import { type DocumentPasses, documentPassesOutOfCore } from '../dedup/out-of-core.js'

export type DedupHostsConfig = {
  /** `s3://bucket/prefix` for the corpus, zephyr's scratch and dedup's. */
  root: string
  /** The iris controller (`host:port`), its token, and this host's address (the driver's registry). */
  controller: string
  token: string
  driverHost: string
}

/** What both paths decided, to compare. */
export type Decisions = Omit<DocumentPasses, 'keep'> & { removed: number[] }

const say = (o: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(o)}\n`)
const bounded = <T>(what: string, ms: number, p: Promise<T>) =>
  Promise.race([
    p,
    new Promise<never>((_, rej) =>
      setTimeout(() => rej(new Error(`dedup hosts-driver: ${what} took over ${ms} ms`)), ms),
    ),
  ])
const decisions = (p: DocumentPasses): Decisions => {
  const { keep, shardStart, exactDuplicates, fuzzyClusters, fuzzyDuplicates, levels } = p
  const removed = [...keep.keys()].filter((i) => keep[i] === 0)
  return { removed, shardStart, exactDuplicates, fuzzyClusters, fuzzyDuplicates, levels, ...examples(p) }
}
const examples = ({ exactExamples, fuzzyExamples }: DocumentPasses) => ({ exactExamples, fuzzyExamples })

/** Unique paragraphs, then exact copies (case and spaces changed; one twice) and near copies (one word changed). */
function corpus(): { id: string; text: string }[] {
  const originals = [...new Set(brownParagraphs(3))].filter((p) => p.split(' ').length >= 12).slice(0, 240)
  const long = originals.filter((p) => p.split(' ').length >= 40)
  const exact = long.slice(0, 4).map((p) => `  ${p.toUpperCase()}  `)
  const near = long.slice(4, 8).map((p) => {
    const w = p.split(' ')
    w[Math.floor(w.length / 2)] = 'zebra'
    return w.join(' ')
  })
  return [...originals, ...exact, exact[0]!, ...near].map((text, i) => ({ id: `doc-${i}`, text }))
}

const config = JSON.parse(process.argv[2] ?? '{}') as DedupHostsConfig
const client = new FrayIrisClient({
  iris: { controller: config.controller, token: config.token },
  driverHost: config.driverHost,
  hostListen: '0.0.0.0',
})
const here = new ZephyrContext({ inProcess: true, progress: 'off' })
const workers = new ZephyrContext({
  client,
  maxWorkers: 2,
  workerResources: { cpu: 1 },
  progress: 'off',
  scratch: `${config.root}/zephyr-scratch/`,
})
try {
  const docs = corpus()
  await here.execute(
    Dataset.fromList(docs, { numShards: 3 }).writeParquet(`${config.root}/corpus/part-{shard:05d}.parquet`),
  )
  const store = await openStorage(`${config.root}/`)
  const shards: string[] = []
  for await (const info of store.list('corpus/')) shards.push(`${config.root}/${info.path}`)
  shards.sort()
  const mh = {
    numPerm: MINHASH_DEFAULTS.numPerm,
    numBands: MINHASH_DEFAULTS.numBands,
    ngram: MINHASH_DEFAULTS.ngram,
    seed: MINHASH_DEFAULTS.seed,
  }
  const mem = await documentPassesInMemory(shards, true, true, mh, 5)
  const ooc = await bounded(
    'the out-of-core dedup',
    60_000,
    documentPassesOutOfCore({
      shards,
      exact: true,
      fuzzy: true,
      mh,
      maxExamples: 5,
      context: workers,
      dir: `${config.root}/dedup-scratch`,
      options: { buckets: 4 },
    }),
  )
  // The network namespace of each worker, read while they still run (`ip netns identify`).
  const namespaces = ((await workers.workers())?.pids() ?? []).map((pid) =>
    pid === undefined
      ? 'restarting'
      : spawnSync('ip', ['netns', 'identify', String(pid)], { encoding: 'utf8', timeout: 5000 }).stdout.trim(),
  )
  let scratchLeft = 0
  for await (const _ of store.list('dedup-scratch/')) scratchLeft++
  say({
    step: 'done',
    documents: docs.length,
    shards: shards.length,
    mem: decisions(mem),
    ooc: decisions(ooc),
    stats: ooc.stats,
    namespaces,
    scratchLeft,
  })
} catch (e) {
  say({ step: 'error', message: (e as Error)?.stack ?? String(e) })
}
await bounded('closing', 15_000, Promise.all([workers.close(), here.close()])).catch(() => {})
await bounded('shutting down', 15_000, client.shutdown()).catch(() => {})
process.exit(0)
