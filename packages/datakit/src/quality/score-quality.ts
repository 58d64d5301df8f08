/**
 * @module `scoreQuality`: every record of a dataset is scored by a quality classifier (the
 * probability of one label) on zephyr workers, and a new dataset version is committed with the
 * score in each record's `meta` and the records below the cut dropped (`filter`) or kept with
 * `kept: false` (`annotate`). The cut is a `threshold`, or the score that keeps the top
 * `topFraction` of the scored records, read from the distribution the first pass returns.
 *
 * Two passes, both on workers: the first scores every record and returns only the scores (8 bytes
 * a record) and the records it skipped (their text is not a string: counted with their id and
 * shard file, never dropped unreported); the second writes the shards from those scores, without
 * scoring again. The version is content-addressed by the input version, the classifier version,
 * the label, the cut and the mode, so a changed threshold is a new version.
 *
 * @example
 * await scoreQuality('web', { classifier: 'classifiers/hq@1', label: 'hq', topFraction: 0.1 })
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
import { APPLY_SCORES, SCORE_SHARD, type ShardScores } from './score-shard.js'
import { classifierModelPath } from './train-quality.js'

const log = logger('datakit')

export type ScoreQualityOptions = OpenOptions & {
  /** The classifier version, `classifiers/<name>[@version]` (as `trainQualityClassifier` returns it). */
  readonly classifier: string
  /** The label whose probability is the score (`hq` or `__label__hq`). */
  readonly label: string
  /** Keep records scoring at least this (0 to 1). One of `threshold` and `topFraction`. */
  readonly threshold?: number
  /** Keep this fraction (0 to 1] of the scored records, the highest scores. */
  readonly topFraction?: number
  /** `filter` drops records below the cut; `annotate` keeps them all. @default 'filter' */
  readonly mode?: 'filter' | 'annotate'
  /** The `meta` key that receives `{ label, score, kept }`. @default 'quality' */
  readonly field?: string
  /** Dataset to write to. @default the input dataset (a new version of it) */
  readonly output?: string
  /** A zephyr context to run on. @default datakit's shared context on worker processes */
  readonly context?: ZephyrContext
}

export type QualityReport = {
  readonly input: string
  readonly classifier: string
  readonly label: string
  readonly mode: 'filter' | 'annotate'
  /** The score a record needed to be kept (from `threshold`, or computed from `topFraction`). */
  readonly cut: number
  readonly topFraction?: number
  readonly documentsIn: number
  readonly scored: number
  /** Records written with `kept: true` (or, when filtering, written at all). */
  readonly kept: number
  /** Scored records with no word the classifier knows (score 0). */
  readonly unscorable: number
  /** Records skipped because their text is not a string, with their shard file and id (at most 100 listed). */
  readonly skipped: number
  readonly skippedExamples: readonly { file: string; pos: number; id: string; reason: string }[]
  /** Score deciles (0 %, 10 %, … 100 %) of the scored records. */
  readonly deciles: readonly number[]
}

export type ScoreQualityResult = {
  readonly name: string
  readonly version: number
  readonly ref: string
  readonly reused: boolean
  readonly report: QualityReport
}

/** Scores and filters (or annotates) dataset `name` with a quality classifier. */
export async function scoreQuality(name: string, opts: ScoreQualityOptions): Promise<ScoreQualityResult> {
  const mode = opts.mode ?? 'filter'
  const field = opts.field ?? 'quality'
  const where = `scoreQuality ${name}`
  if (mode !== 'filter' && mode !== 'annotate')
    throw new DatakitError('INVALID_ARGUMENT', `${where}: mode must be 'filter' or 'annotate', got ${mode}`)
  const { threshold, topFraction } = opts
  if ((threshold === undefined) === (topFraction === undefined))
    throw new DatakitError('INVALID_ARGUMENT', `${where}: give exactly one of threshold and topFraction`)
  if (threshold !== undefined && !(threshold >= 0 && threshold <= 1))
    throw new DatakitError('INVALID_ARGUMENT', `${where}: threshold must be in [0, 1], got ${threshold}`)
  if (topFraction !== undefined && !(topFraction > 0 && topFraction <= 1))
    throw new DatakitError('INVALID_ARGUMENT', `${where}: topFraction must be in (0, 1], got ${topFraction}`)
  if (typeof opts.label !== 'string' || opts.label === '')
    throw new DatakitError('INVALID_ARGUMENT', `${where}: label is required (e.g. 'hq')`)

  const input = await openDataset(name, opts)
  const model = await classifierModelPath(opts.classifier, opts)
  const outName = opts.output ?? name
  const artifact = datasetArtifact(outName)
  const config = {
    pass: 'quality',
    input: input.ref,
    classifier: model.ref,
    label: opts.label,
    mode,
    field,
    ...(threshold !== undefined ? { threshold } : { topFraction: topFraction! }),
  }
  const key = createHash('sha256').update(JSON.stringify(config)).digest('hex')

  return withStore(opts, async (store) => {
    const reused = await reusedPass<QualityReport>(store, artifact, key, 'quality-report.json')
    if (reused) return { name: outName, ...reused, reused: true }
    const context = opts.context ?? defaultContext()
    const shards = () =>
      Dataset.fromList([...input.shards], { numShards: input.shards.length }).loadParquet<DatakitRecord>()
    const { results } = await context.execute(
      shards().mapShard(SCORE_SHARD, { args: { model: model.path, label: opts.label } }),
    )
    const perShard = results as ShardScores[]
    const byShard = new Map<number, Float64Array>()
    const all: number[] = []
    let documentsIn = 0
    let unscorable = 0
    const skippedExamples: QualityReport['skippedExamples'][number][] = []
    let skipped = 0
    for (const s of perShard) {
      byShard.set(s.shard, s.scores)
      documentsIn += s.scores.length
      unscorable += s.unscorable
      for (const x of s.scores) if (!Number.isNaN(x)) all.push(x)
      skipped += s.skipped.length
      for (const k of s.skipped)
        if (skippedExamples.length < 100) skippedExamples.push({ file: input.shards[s.shard] ?? '?', ...k })
    }
    all.sort((a, b) => b - a)
    const cut =
      threshold ??
      (all.length === 0 ? Number.POSITIVE_INFINITY : all[Math.max(0, Math.ceil(topFraction! * all.length) - 1)]!)
    const kept = all.filter((x) => x >= cut).length
    const deciles =
      all.length === 0 ? [] : [...Array(11).keys()].map((d) => all[Math.round(((10 - d) / 10) * (all.length - 1))]!)
    const report: QualityReport = {
      input: input.ref,
      classifier: model.ref,
      label: opts.label,
      mode,
      cut,
      ...(topFraction !== undefined ? { topFraction } : {}),
      documentsIn,
      scored: all.length,
      kept,
      unscorable,
      skipped,
      skippedExamples,
      deciles,
    }
    if (skipped > 0) log.warn({ input: input.ref, skipped, examples: skippedExamples.slice(0, 5) }, 'records skipped')

    const dir = workDir(opts, 'quality', outName, key.slice(0, 16))
    await rm(dir, { recursive: true, force: true })
    await context.execute(
      shards()
        .mapShard(APPLY_SCORES, { args: { scores: byShard, threshold: cut, mode, field, label: opts.label } })
        .writeParquet(`${dir}/part-{shard:05d}-of-{total:05d}.parquet`),
    )
    const { version, ref } = await commitPass({
      store,
      artifact,
      dir,
      reportFile: 'quality-report.json',
      report,
      key,
      config,
      metadata: {
        quality: {
          classifier: model.ref,
          label: opts.label,
          mode,
          cut,
          documentsIn,
          scored: all.length,
          kept,
          unscorable,
          skipped,
        },
      },
      source: `quality scoring of ${input.ref} by ${model.ref}`,
      lineage: [input.ref, model.ref],
    })
    log.info({ input: input.ref, output: ref, documentsIn, kept, skipped }, 'quality scoring done')
    return { name: outName, version, ref, reused: false, report }
  })
}
