/**
 * @module `trainQualityClassifier`: a datakit step that trains a fastText-style classifier on
 * labelled examples and commits the model file to finestore as `classifiers/<name>`, with the
 * training counts in the version's metadata. The version is content-addressed by the resolved
 * hyper-parameters and the examples (their hash, or the dataset version they came from): the same
 * ones reuse the version, without training; anything else makes a new one.
 *
 * @example
 * const clf = await trainQualityClassifier({ name: 'hq', file: 'train.txt', args: { wordNgrams: 2 } })
 * await scoreQuality('web', { classifier: clf.ref, label: 'hq', threshold: 0.5 })
 */
import { createHash } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import type { JsonObject } from '@marin/finestore'
import { logger, MARIN_LAYOUT } from '@marin/rigging'
import { Dataset, type ZephyrContext } from '@marin/zephyr'
import { findVersionByKey } from '../dataset/ingest.js'
import { openDataset, parseDatasetRef, resolveVersion } from '../dataset/open-dataset.js'
import type { DatakitRecord } from '../dataset/record.js'
import { DatakitError } from '../errors.js'
import { bareName, resolvePrefix, type StoreAccess, withStore } from '../store.js'
import { defaultContext } from '../zephyr-context.js'
import type { ClassifierArgs } from './classifier.js'
import { resolveArgs } from './classifier.js'
import { encodeClassifier } from './model-file.js'
import { type LabelledExample, type TrainStats, trainClassifier } from './train.js'

const log = logger('datakit')

/** The model file's name inside a `classifiers/<name>` version. */
export const MODEL_FILE = 'model.mqc'

/** Artifact name of classifier `name` (bare or `classifiers/…`) in finestore. */
export function classifierArtifact(name: string): string {
  return `classifiers/${bareName(name, 'classifiers')}`
}

export type TrainQualityOptions = StoreAccess & {
  /** The classifier's name: the artifact is `classifiers/<name>`. */
  readonly name: string
  /** Examples given directly. */
  readonly examples?: readonly LabelledExample[]
  /** A file of fastText lines (`__label__hq text…`, one example a line). */
  readonly file?: string
  /** A dataset (`name[@version]`) whose records carry their label in `meta[labelField]`. */
  readonly dataset?: string
  /** The meta key holding a dataset record's label (a string or an array of strings). @default 'label' */
  readonly labelField?: string
  /** fastText hyper-parameters; fastText's supervised defaults otherwise. */
  readonly args?: Partial<ClassifierArgs>
  /** A zephyr context to read a dataset on. @default datakit's shared context */
  readonly context?: ZephyrContext
}

export type TrainQualityResult = {
  readonly name: string
  readonly version: number
  /** `classifiers/<name>@<version>`: what `scoreQuality` takes. */
  readonly ref: string
  readonly reused: boolean
  readonly stats: TrainStats
  readonly modelBytes: number
}

/** Trains (or finds) a quality classifier and commits its model file to finestore. */
export async function trainQualityClassifier(opts: TrainQualityOptions): Promise<TrainQualityResult> {
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(bareName(opts.name ?? '', 'classifiers')))
    throw new DatakitError(
      'INVALID_ARGUMENT',
      `trainQualityClassifier: name "${opts.name}" must be letters, digits, ".", "_" or "-"`,
    )
  const given = [opts.examples, opts.file, opts.dataset].filter((x) => x !== undefined).length
  if (given !== 1)
    throw new DatakitError(
      'INVALID_ARGUMENT',
      `trainQualityClassifier ${opts.name}: give exactly one of examples, file or dataset (got ${given})`,
    )
  const args = resolveArgs(opts.args)
  const artifact = classifierArtifact(opts.name)
  const { examples, data, lineage } = await loadExamples(opts)
  const config = { step: 'train-quality-classifier', args, data }
  const key = createHash('sha256').update(JSON.stringify(config)).digest('hex')

  return withStore(opts, async (store) => {
    const found = await findVersionByKey(store, artifact, key)
    if (found !== undefined) {
      const m = await store.manifest(artifact, found)
      const stats = m.metadata.training as unknown as TrainStats
      return {
        name: opts.name,
        version: found,
        ref: `${artifact}@${found}`,
        reused: true,
        stats,
        modelBytes: Number(m.metadata.modelBytes),
      }
    }
    const t0 = performance.now()
    const { classifier, stats } = trainClassifier(examples, args)
    const bytes = encodeClassifier(classifier)
    const metadata: JsonObject = {
      training: stats as unknown as JsonObject,
      labels: [...classifier.labels],
      modelBytes: bytes.length,
      trainSeconds: (performance.now() - t0) / 1000,
    }
    const { version, ref } = await store.commit(
      artifact,
      async (txn) => {
        await txn.put(MODEL_FILE, bytes)
      },
      {
        kind: 'classifiers',
        metadata,
        config: { ...config, args: { ...args }, buildKey: key } as unknown as JsonObject,
        lineage,
        message: `quality classifier ${opts.name}: ${stats.examples} examples, ${stats.labels} labels`,
      },
    )
    log.info({ ref, examples: stats.examples, labels: stats.labels, modelBytes: bytes.length }, 'classifier trained')
    return { name: opts.name, version, ref, reused: false, stats, modelBytes: bytes.length }
  })
}

async function loadExamples(
  opts: TrainQualityOptions,
): Promise<{ examples: readonly LabelledExample[]; data: JsonObject; lineage: string[] }> {
  const hashOf = (lines: readonly LabelledExample[]) => {
    const h = createHash('sha256')
    for (const e of lines) h.update(typeof e === 'string' ? e : JSON.stringify(e)).update('\n')
    return h.digest('hex')
  }
  if (opts.examples !== undefined)
    return { examples: opts.examples, data: { examples: hashOf(opts.examples) }, lineage: [] }
  if (opts.file !== undefined) {
    let text: string
    try {
      text = await readFile(opts.file, 'utf8')
    } catch (err) {
      throw new DatakitError('SOURCE_NOT_FOUND', `trainQualityClassifier ${opts.name}: cannot read ${opts.file}`, {
        cause: err,
      })
    }
    const lines = text.split('\n').filter((l) => l.trim() !== '')
    return { examples: lines, data: { examples: hashOf(lines) }, lineage: [] }
  }
  const input = await openDataset(parseDatasetRef(opts.dataset!).name, {
    ...opts,
    version: parseDatasetRef(opts.dataset!).version,
  })
  const field = opts.labelField ?? 'label'
  const context = opts.context ?? defaultContext()
  const { results } = await context.execute(
    Dataset.fromList([...input.shards], { numShards: input.shards.length }).loadParquet<DatakitRecord>(),
  )
  const examples: LabelledExample[] = []
  for (const r of results) {
    let meta: Record<string, unknown>
    try {
      meta = JSON.parse(r.meta || '{}') as Record<string, unknown>
    } catch {
      throw new DatakitError(
        'INVALID_ARGUMENT',
        `trainQualityClassifier: record ${r.id} of ${input.ref} has meta that is not JSON`,
      )
    }
    const l = meta[field]
    const labels = typeof l === 'string' ? [l] : Array.isArray(l) ? l.filter((x) => typeof x === 'string') : []
    if (labels.length === 0 || typeof r.text !== 'string')
      throw new DatakitError(
        'INVALID_ARGUMENT',
        `trainQualityClassifier: record ${r.id} of ${input.ref} has no meta.${field} label or no text; ` +
          `label every record or pick the labelled ones first`,
      )
    examples.push({ labels, text: r.text })
  }
  return { examples, data: { dataset: input.ref, labelField: field }, lineage: [input.ref] }
}

/**
 * The local path of a classifier version's model file (`classifiers/<name>[@version]`), copied out
 * of the store once into datakit's cache, named by its content hash, and verified then.
 */
export async function classifierModelPath(ref: string, access: StoreAccess): Promise<{ path: string; ref: string }> {
  const { name, version } = parseDatasetRef(ref)
  const artifact = classifierArtifact(name)
  return withStore(access, async (store) => {
    const v = await resolveVersion(store, artifact, version, 'classifiers')
    const view = await store.open(`${artifact}@${v}`)
    if (!view.has(MODEL_FILE))
      throw new DatakitError(
        'INVALID_ARGUMENT',
        `classifier ${view.ref} has no ${MODEL_FILE}; train it with trainQualityClassifier`,
      )
    const local = join(resolvePrefix(access.prefix), MARIN_LAYOUT.datakitCache, `${view.entry(MODEL_FILE).blob}.mqc`)
    await view.copyTo(MODEL_FILE, local)
    return { path: local, ref: view.ref }
  })
}
