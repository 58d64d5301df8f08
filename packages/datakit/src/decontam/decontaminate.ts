/**
 * @module Decontamination: training documents that share a word n-gram (13 by default) with any
 * evaluation task's documents are removed (or flagged), and a new version of the dataset is
 * committed with the counts per task in its metadata and `decontam-report.json` beside the shards.
 *
 * Two zephyr passes over the shards, both on worker processes: the first checks every document
 * against the n-gram index (a bound argument, see `ngram-index.ts`) and returns only the hits;
 * the second writes the shards with the hits dropped or flagged. Nothing but the hits is held in
 * this process. The version is content-addressed by the input version, n, the mode and a hash of
 * the index (its task names and n-grams), so changed evaluation sets make a new version and the
 * same ones reuse it.
 *
 * @example
 * const index = await buildNgramIndex([{ task: 'brown_qa', texts: questions }])
 * const { report } = await decontaminate('brown-dedup', { index })
 * report.perTask // [{ task: 'brown_qa', documents: 3, ngrams: 41 }]
 */
import { createHash } from 'node:crypto'
import { rm } from 'node:fs/promises'
import { logger } from '@marin/rigging'
import { Dataset, type ZephyrContext } from '@marin/zephyr'
import { commitPass, reusedPass } from '../dataset/pass-version.js'
import { openDataset, type OpenOptions } from '../dataset/open-dataset.js'
import type { DatakitRecord } from '../dataset/record.js'
import { DatakitError } from '../errors.js'
import { datasetArtifact, withStore, workDir } from '../store.js'
import { defaultContext } from '../zephyr-context.js'
import { DECONTAM_APPLY, DECONTAM_FIND, type DecontamHit } from './decontam-shard.js'
import type { NgramIndex } from './ngram-index.js'

const log = logger('datakit')

export type DecontaminateOptions = OpenOptions & {
  /** The evaluation n-grams (`buildNgramIndex`). */
  readonly index: NgramIndex
  /** `remove` drops contaminated documents; `flag` keeps them with `meta.contamination`. @default 'remove' */
  readonly mode?: 'remove' | 'flag'
  /** Dataset to write the result to. @default the input dataset (a new version of it) */
  readonly output?: string
  /** Example hits in the report. @default 5 */
  readonly examples?: number
  /** A zephyr context to run on. @default datakit's shared context on worker processes */
  readonly context?: ZephyrContext
}

export type DecontamReport = {
  readonly input: string
  readonly n: number
  readonly mode: 'remove' | 'flag'
  readonly documentsIn: number
  /** Documents that share at least one n-gram with some task. */
  readonly contaminated: number
  /** Documents written (all of them when flagging). */
  readonly kept: number
  /** Per task: the evaluation documents it gave, those too short for an n-gram, and what matched it. */
  readonly perTask: readonly {
    task: string
    evalDocuments: number
    evalTooShort: number
    documents: number
    ngrams: number
  }[]
  readonly examples: readonly { id: string; tasks: string[]; ngrams: number }[]
}

export type DecontaminateResult = {
  readonly name: string
  readonly version: number
  readonly ref: string
  readonly reused: boolean
  readonly report: DecontamReport
}

/** What identifies the index in a version's config: its n, task names and n-grams. */
export function indexHash(index: NgramIndex): string {
  const h = createHash('sha256').update(JSON.stringify({ n: index.n, tasks: index.tasks }))
  h.update(new Uint8Array(index.grams.buffer, index.grams.byteOffset, index.grams.byteLength))
  h.update(new Uint8Array(index.offsets.buffer, index.offsets.byteOffset, index.offsets.byteLength))
  h.update(new Uint8Array(index.taskIds.buffer, index.taskIds.byteOffset, index.taskIds.byteLength))
  return h.digest('hex')
}

/** Removes (or flags) the documents of dataset `name` that share an n-gram with the index's tasks. */
export async function decontaminate(name: string, opts: DecontaminateOptions): Promise<DecontaminateResult> {
  const { index } = opts
  const mode = opts.mode ?? 'remove'
  if (mode !== 'remove' && mode !== 'flag')
    throw new DatakitError('INVALID_ARGUMENT', `decontaminate ${name}: mode must be 'remove' or 'flag', got ${mode}`)
  if (index?.grams === undefined)
    throw new DatakitError(
      'INVALID_ARGUMENT',
      `decontaminate ${name}: index is missing; build one with buildNgramIndex`,
    )
  const input = await openDataset(name, opts)
  const outName = opts.output ?? name
  const artifact = datasetArtifact(outName)
  const config = { pass: 'decontaminate', input: input.ref, n: index.n, mode, index: indexHash(index) }
  const key = createHash('sha256').update(JSON.stringify(config)).digest('hex')

  return withStore(opts, async (store) => {
    const reused = await reusedPass<DecontamReport>(store, artifact, key, 'decontam-report.json')
    if (reused) return { name: outName, ...reused, reused: true }
    const context = opts.context ?? defaultContext()
    const shards = () =>
      Dataset.fromList([...input.shards], { numShards: input.shards.length }).loadParquet<DatakitRecord>()
    const { results: hits, counters } = await context.execute(shards().mapShard(DECONTAM_FIND, { args: index }))
    const documentsIn = counters[0]?.recordsIn ?? 0

    const perTask = index.tasks.map((task, t) => ({
      task,
      evalDocuments: index.documents[t] ?? 0,
      evalTooShort: index.tooShort[t] ?? 0,
      documents: 0,
      ngrams: 0,
    }))
    const byShard = new Map<number, Map<number, { tasks: string[]; ngrams: number }>>()
    for (const hit of hits as DecontamHit[]) {
      for (const t of hit.tasks) {
        perTask[t]!.documents++
        perTask[t]!.ngrams += hit.ngrams
      }
      let m = byShard.get(hit.shard)
      if (m === undefined) byShard.set(hit.shard, (m = new Map()))
      m.set(hit.pos, { tasks: hit.tasks.map((t) => index.tasks[t]!), ngrams: hit.ngrams })
    }
    const contaminated = hits.length
    const report: DecontamReport = {
      input: input.ref,
      n: index.n,
      mode,
      documentsIn,
      contaminated,
      kept: mode === 'remove' ? documentsIn - contaminated : documentsIn,
      perTask,
      examples: (hits as DecontamHit[]).slice(0, opts.examples ?? 5).map((h) => ({
        id: h.id,
        tasks: h.tasks.map((t) => index.tasks[t]!),
        ngrams: h.ngrams,
      })),
    }

    const dir = workDir(opts, 'decontaminate', outName, key.slice(0, 16))
    await rm(dir, { recursive: true, force: true })
    await context.execute(
      shards()
        .mapShard(DECONTAM_APPLY, { args: { mode, hits: byShard } })
        .writeParquet(`${dir}/part-{shard:05d}-of-{total:05d}.parquet`),
    )
    const { version, ref } = await commitPass({
      store,
      artifact,
      dir,
      reportFile: 'decontam-report.json',
      report,
      key,
      config,
      metadata: {
        decontamination: {
          n: index.n,
          mode,
          documentsIn,
          contaminated,
          perTask: Object.fromEntries(perTask.map((p) => [p.task, { documents: p.documents, ngrams: p.ngrams }])),
        },
      },
      source: `decontamination of ${input.ref}`,
      lineage: [input.ref],
    })
    log.info({ input: input.ref, output: ref, documentsIn, contaminated }, 'decontamination done')
    return { name: outName, version, ref, reused: false, report }
  })
}
