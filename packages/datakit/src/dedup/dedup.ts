/**
 * @module Dedup passes over a dataset version, by level: exact documents (normalized-text
 * hash), fuzzy documents (MinHash LSH at the dupekit defaults, clustered by connected
 * components), then, on request, paragraphs and lines (a span whose normalized text
 * appeared earlier in the dataset is removed, as datatrove's and Marin's exact
 * paragraph dedup do; a document left empty is dropped). The first occurrence in
 * shard order is kept; the kept records are written by zephyr into a new version of
 * the dataset, with the input as its lineage and a report of what each level removed.
 *
 * @example
 * const { ref, report } = await dedup('brown', { paragraphs: true })
 * report.levels // [{ level: 'exact', … }, { level: 'fuzzy', … }, { level: 'paragraph', removed: 26, … }]
 */
import { createHash } from 'node:crypto'
import { readdir, rm } from 'node:fs/promises'
import { join } from 'node:path'
import { exactKey, exactKeys, findDuplicateClusters, MINHASH_DEFAULTS } from '@marin/dupekit'
import type { JsonObject } from '@marin/finestore'
import { logger } from '@marin/rigging'
import { Dataset, ParquetReader, type ZephyrContext } from '@marin/zephyr'
import { DatakitError } from '../errors.js'
import { defaultContext } from '../zephyr-context.js'
import { findVersionByKey } from '../dataset/ingest.js'
import { summarizeShards } from '../dataset/shard-tally.js'
import { openDataset } from '../dataset/open-dataset.js'
import type { OpenOptions } from '../dataset/open-dataset.js'
import type { DatakitRecord } from '../dataset/record.js'
import { datasetArtifact, withStore, workDir } from '../store.js'
import { DEDUP_SHARD } from './dedup-shard.js'
import {
  type DocumentPasses,
  documentPassesOutOfCore,
  type OutOfCoreOptions,
  type OutOfCoreStats,
} from './out-of-core.js'
import { dropLines, dropParagraphs, type SpanEdit, splitLines, splitParagraphs } from './spans.js'

const log = logger('datakit')

export type DedupOptions = OpenOptions & {
  /** Remove documents whose normalized text equals an earlier one's. @default true */
  readonly exact?: boolean
  /** Remove near-duplicates found by MinHash LSH. @default true */
  readonly fuzzy?: boolean
  /** Remove each paragraph (blank-line separated) whose normalized text appeared earlier. @default false */
  readonly paragraphs?: boolean
  /** Remove each non-blank line whose normalized text appeared earlier (after the paragraph level). @default false */
  readonly lines?: boolean
  /** MinHash permutations. @default 286 */
  readonly numPerm?: number
  /** LSH bands. @default 26 */
  readonly numBands?: number
  /** Shingle length (characters). @default 5 */
  readonly ngram?: number
  /** @default 42 */
  readonly seed?: number
  /** Dataset to write the result to. @default the input dataset (a new version of it) */
  readonly output?: string
  /** Example clusters in the report. @default 5 */
  readonly examples?: number
  /** A zephyr context to run on (pass one to reuse its workers across calls). @default datakit's shared context on
   * worker processes */
  readonly context?: ZephyrContext
  /**
   * Run the exact and fuzzy levels out of core: signatures per shard on the context's
   * workers, shuffled by bucket through local disk (or, with `{ scratch: 's3://…' }`, through
   * storage every worker reaches, for workers on other hosts), clusters merged (same decisions
   * as in memory; see `out-of-core.ts`). `true` or `{ buckets, scratch }` forces it, `false`
   * keeps every text in this process. Paragraph and line levels run in memory only.
   * @default out of core above 200,000 documents
   */
  readonly outOfCore?: boolean | OutOfCoreOptions
}

/** Documents above which dedup runs out of core unless told otherwise. */
const OUT_OF_CORE_ABOVE = 200_000

/** What one level of a dedup pass removed. */
export type DedupLevelReport = {
  readonly level: 'exact' | 'fuzzy' | 'paragraph' | 'line'
  /** What the level counts: documents for exact and fuzzy, paragraphs or non-blank lines for the others. */
  readonly unit: 'documents' | 'paragraphs' | 'lines'
  /** Units the level looked at (what the levels before it kept). */
  readonly of: number
  readonly removed: number
  /** UTF-8 bytes of the removed units' text. */
  readonly bytesRemoved: number
  /** Documents dropped because every span of them was removed. */
  readonly documentsEmptied: number
}

/** What a dedup pass found and kept. */
export type DedupReport = {
  readonly input: string
  readonly documentsIn: number
  /** Documents removed because their normalized text matched an earlier one. */
  readonly exactDuplicates: number
  /** Clusters (two or more exact-unique documents) found by MinHash LSH. */
  readonly fuzzyClusters: number
  /** Documents removed as members of a fuzzy cluster other than its first. */
  readonly fuzzyDuplicates: number
  /** Documents written (some may have lost paragraphs or lines). */
  readonly kept: number
  /** What each level that ran removed, in the order they ran. */
  readonly levels: readonly DedupLevelReport[]
  /** A few clusters: ids, and the first 100 characters of each text. */
  readonly exampleClusters: { kind: 'exact' | 'fuzzy'; ids: string[]; texts: string[] }[]
}

export type DedupResult = {
  readonly name: string
  readonly version: number
  readonly ref: string
  readonly reused: boolean
  readonly report: DedupReport
  /** How the run went out of core, when it did (absent when reused). */
  readonly outOfCore?: OutOfCoreStats
}

/** Runs the dedup passes on a dataset version and commits the kept documents as a new version. */
export async function dedup(name: string, opts: DedupOptions = {}): Promise<DedupResult> {
  const exact = opts.exact ?? true
  const fuzzy = opts.fuzzy ?? true
  const paragraphs = opts.paragraphs ?? false
  const lines = opts.lines ?? false
  const mh = {
    numPerm: opts.numPerm ?? MINHASH_DEFAULTS.numPerm,
    numBands: opts.numBands ?? MINHASH_DEFAULTS.numBands,
    ngram: opts.ngram ?? MINHASH_DEFAULTS.ngram,
    seed: opts.seed ?? MINHASH_DEFAULTS.seed,
  }
  if (!exact && !fuzzy && !paragraphs && !lines)
    throw new DatakitError(
      'INVALID_ARGUMENT',
      `dedup ${name}: every level is off; enable at least one of exact, fuzzy, paragraphs, lines`,
    )
  const input = await openDataset(name, opts)
  const records = typeof input.metadata.records === 'number' ? input.metadata.records : Number.POSITIVE_INFINITY
  const ooc =
    opts.outOfCore === undefined ? records > OUT_OF_CORE_ABOVE && !paragraphs && !lines : opts.outOfCore !== false
  if (ooc && (paragraphs || lines))
    throw new DatakitError(
      'INVALID_ARGUMENT',
      `dedup ${name}: the ${paragraphs ? 'paragraphs' : 'lines'} level runs in memory only, and outOfCore is on; ` +
        'run the sub-document levels without outOfCore (on a smaller dataset), or leave them off',
    )
  const outName = opts.output ?? name
  const artifact = datasetArtifact(outName)
  const config = {
    pass: 'dedup',
    input: input.ref,
    datasetHash: input.metadata.datasetHash ?? null,
    exact,
    fuzzy,
    ...mh,
    // only when on, so versions made before these levels existed are still found
    ...(paragraphs ? { paragraphs } : {}),
    ...(lines ? { lines } : {}),
  }
  const key = createHash('sha256').update(JSON.stringify(config)).digest('hex')

  return withStore(opts, async (store) => {
    const found = await findVersionByKey(store, artifact, key)
    if (found !== undefined) {
      const view = await store.open(`${artifact}@${found}`)
      return {
        name: outName,
        version: found,
        ref: view.ref,
        reused: true,
        report: JSON.parse(await view.readText('dedup-report.json')) as DedupReport,
      }
    }
    const maxExamples = opts.examples ?? 5
    const context = opts.context ?? defaultContext()
    const dir = workDir(opts, 'dedup', outName, key.slice(0, 16))
    let passes: DocumentPasses
    let stats: OutOfCoreStats | undefined
    const edits = new Map<number, SpanEdit>()
    if (ooc) {
      const oocOptions = typeof opts.outOfCore === 'object' ? opts.outOfCore : {}
      const r = await documentPassesOutOfCore({
        shards: input.shards,
        exact,
        fuzzy,
        mh,
        maxExamples,
        context,
        // a scratch URL is shared by runs: each run of a configuration has its own folder in it
        dir: oocOptions.scratch
          ? `${oocOptions.scratch.replace(/\/+$/, '')}/dedup-${key.slice(0, 16)}`
          : join(dir, 'signatures'),
        options: oocOptions,
      })
      passes = r
      stats = r.stats
    } else {
      const r = await documentPassesInMemory(input.shards, exact, fuzzy, mh, maxExamples)
      passes = r
      // Sub-document levels, over the kept documents in order.
      if (paragraphs) passes.levels.push(spanLevel('paragraph', r.texts, passes.keep, edits))
      if (lines) passes.levels.push(spanLevel('line', r.texts, passes.keep, edits))
    }
    const { keep, shardStart, exactDuplicates, fuzzyClusters, fuzzyDuplicates, levels } = passes
    const { exactExamples, fuzzyExamples } = passes
    // Show both kinds: fuzzy clusters first, exact ones after, up to maxExamples in all.
    const nFuzzy = Math.min(
      fuzzyExamples.length,
      Math.max(Math.ceil(maxExamples / 2), maxExamples - exactExamples.length),
    )
    const examples = [...fuzzyExamples.slice(0, nFuzzy), ...exactExamples.slice(0, maxExamples - nFuzzy)]
    const kept = keep.reduce((a, b) => a + b, 0)
    const report: DedupReport = {
      input: input.ref,
      documentsIn: keep.length,
      exactDuplicates,
      fuzzyClusters,
      fuzzyDuplicates,
      kept,
      levels,
      exampleClusters: examples,
    }

    await rm(dir, { recursive: true, force: true })
    const ds = Dataset.fromList([...input.shards], { numShards: input.shards.length })
      .loadParquet<DatakitRecord>()
      // a module export with the decisions as bound args: it runs on worker processes
      .mapShard(DEDUP_SHARD, { args: { keep, shardStart, edits } })
      .writeParquet(`${dir}/part-{shard:05d}-of-{total:05d}.parquet`)
    await context.execute(ds)
    const shards = (await readdir(dir)).filter((f) => /^part-\d+-of-\d+\.parquet$/.test(f)).sort()
    const summary = await summarizeShards(shards.map((f) => join(dir, f)))
    const metadata: JsonObject = {
      ...summary,
      shards: shards.length,
      source: `dedup of ${input.ref}`,
      dedup: {
        documentsIn: report.documentsIn,
        exactDuplicates,
        fuzzyClusters,
        fuzzyDuplicates,
        kept,
        ...Object.fromEntries(
          levels
            .filter((l) => l.unit !== 'documents')
            .map((l) => [`${l.level}Removed`, `${l.removed} of ${l.of} ${l.unit}, ${l.bytesRemoved} bytes`]),
        ),
      },
    }
    const { version, ref } = await store.commit(
      artifact,
      async (txn) => {
        for (const f of shards) await txn.put(f, { file: join(dir, f) })
        await txn.put('dedup-report.json', JSON.stringify(report, null, 2))
      },
      {
        kind: 'datasets',
        metadata,
        config: { ...config, buildKey: key },
        lineage: [input.ref],
        message: `dedup of ${input.ref}`,
      },
    )
    await rm(dir, { recursive: true, force: true })
    log.info({ input: input.ref, output: ref, documentsIn: report.documentsIn, kept }, 'dedup done')
    return { name: outName, version, ref, reused: false, report, ...(stats ? { outOfCore: stats } : {}) }
  })
}

function documentLevel(level: 'exact' | 'fuzzy', of: number, removed: number, bytes: number): DedupLevelReport {
  return { level, unit: 'documents', of, removed, bytesRemoved: bytes, documentsEmptied: 0 }
}

/**
 * One sub-document level over the kept documents in order: a span whose normalized text
 * was seen earlier is removed. Updates `texts` (what the next level sees), `keep` (a
 * document left empty is dropped) and `edits` (what the shard writer applies).
 */
function spanLevel(
  level: 'paragraph' | 'line',
  texts: string[],
  keep: Uint8Array,
  edits: Map<number, SpanEdit>,
): DedupLevelReport {
  const seen = new Set<string>()
  let of = 0
  let removed = 0
  let bytesRemoved = 0
  let documentsEmptied = 0
  for (let i = 0; i < texts.length; i++) {
    if (keep[i] !== 1) continue
    const spans = level === 'paragraph' ? splitParagraphs(texts[i]!) : splitLines(texts[i]!)
    const drop: number[] = []
    for (let j = 0; j < spans.length; j++) {
      const span = spans[j]!
      if (span.trim() === '') continue
      of++
      const key = exactKey(span)
      if (!seen.has(key)) seen.add(key)
      else {
        drop.push(j)
        bytesRemoved += Buffer.byteLength(span)
      }
    }
    if (drop.length === 0) continue
    removed += drop.length
    const text = level === 'paragraph' ? dropParagraphs(texts[i]!, drop) : dropLines(texts[i]!, drop)
    texts[i] = text
    const edit = edits.get(i) ?? {}
    edits.set(i, level === 'paragraph' ? { ...edit, paragraphs: drop } : { ...edit, lines: drop })
    if (text === '') {
      keep[i] = 0
      documentsEmptied++
    }
  }
  const unit = level === 'paragraph' ? 'paragraphs' : 'lines'
  return { level, unit, of, removed, bytesRemoved, documentsEmptied }
}

/** The exact and fuzzy levels with every text in this process; `texts` is what the sub-document levels read. */
export async function documentPassesInMemory(
  shards: readonly string[],
  exact: boolean,
  fuzzy: boolean,
  mh: { numPerm: number; numBands: number; ngram: number; seed: number },
  maxExamples: number,
): Promise<DocumentPasses & { texts: string[] }> {
  // Every document, in shard order: position i is what the clustering numbers.
  const ids: string[] = []
  const texts: string[] = []
  const shardStart: number[] = []
  for (const path of shards) {
    shardStart.push(ids.length)
    for await (const row of new ParquetReader({ path })) {
      const r = row as { id: string; text: string }
      ids.push(r.id)
      texts.push(r.text)
    }
  }
  const keep = new Uint8Array(texts.length).fill(1)
  const exactExamples: DedupReport['exampleClusters'] = []
  const fuzzyExamples: DedupReport['exampleClusters'] = []
  const snippet = (i: number): string => texts[i]!.slice(0, 100)
  const levels: DedupLevelReport[] = []
  const bytesOf = (i: number): number => Buffer.byteLength(texts[i]!)
  // Exact pass: the first document of each normalized-text group stays.
  let exactDuplicates = 0
  let exactBytes = 0
  const reps: number[] = []
  if (exact) {
    const groups = new Map<string, number[]>()
    exactKeys(texts).forEach((k, i) => {
      const g = groups.get(k)
      if (g) g.push(i)
      else groups.set(k, [i])
    })
    for (const g of groups.values()) {
      reps.push(g[0]!)
      for (const i of g.slice(1)) {
        keep[i] = 0
        exactBytes += bytesOf(i)
      }
      exactDuplicates += g.length - 1
      if (g.length > 1 && exactExamples.length < maxExamples)
        exactExamples.push({ kind: 'exact', ids: g.map((i) => ids[i]!), texts: g.map(snippet) })
    }
    reps.sort((a, b) => a - b)
    levels.push(documentLevel('exact', texts.length, exactDuplicates, exactBytes))
  } else {
    for (let i = 0; i < texts.length; i++) reps.push(i)
  }
  // Fuzzy pass over the exact-unique documents: connected components of LSH candidates.
  let fuzzyClusters = 0
  let fuzzyDuplicates = 0
  let fuzzyBytes = 0
  if (fuzzy && reps.length > 1) {
    const { clusters } = findDuplicateClusters(
      reps.map((i) => texts[i]!),
      { ...mh, exact: false },
    )
    for (const c of clusters) {
      const members = c.map((j) => reps[j]!)
      fuzzyClusters++
      fuzzyDuplicates += members.length - 1
      for (const i of members.slice(1)) {
        keep[i] = 0
        fuzzyBytes += bytesOf(i)
      }
      if (fuzzyExamples.length < maxExamples)
        fuzzyExamples.push({ kind: 'fuzzy', ids: members.map((i) => ids[i]!), texts: members.map(snippet) })
    }
  }
  if (fuzzy) levels.push(documentLevel('fuzzy', reps.length, fuzzyDuplicates, fuzzyBytes))
  return {
    keep,
    shardStart,
    exactDuplicates,
    fuzzyClusters,
    fuzzyDuplicates,
    levels,
    exactExamples,
    fuzzyExamples,
    texts,
  }
}
