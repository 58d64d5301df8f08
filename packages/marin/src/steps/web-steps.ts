/**
 * @module Steps for web data, on datakit: WARC files to extracted, language-tagged documents
 * (`warcIngestStep`), a language filter (`languageFilterStep`), a fastText-style quality
 * classifier trained on labelled examples (`qualityClassifierStep`) and the filter that scores
 * every document with it (`qualityFilterStep`). Each records the finestore version it made in
 * `artifacts.json` with datakit's counts (pages read, skipped with file and offset, kept by
 * language; scores and cut), and its thresholds are versioned: a changed one is a new version.
 *
 * @example
 * const pages = warcIngestStep({ name: 'crawl', source: sample.output('crawl.warc.gz') })
 * const english = languageFilterStep(pages, { name: 'crawl-en', languages: ['en'], threshold: 0.5 })
 * const hq = qualityClassifierStep({ name: 'hq', file: labelled.output('examples.txt') })
 * const kept = qualityFilterStep(english, { name: 'crawl-hq', classifier: hq, label: 'hq', topFraction: 0.5 })
 */
import type { ClassifierArgs } from '@marin/datakit'
import { MarinError } from '../errors.js'
import type { ArtifactRef } from '../executor/artifacts.js'
import { isOutputRef, step, type OutputRef, type Step } from '../executor/step.js'
import { versioned } from '../executor/versioned.js'
import { prepareOutput, writeArtifacts } from './artifacts.js'

const datakit = () => import('@marin/datakit')

/** A path, a glob, or another step's output, in a config: strings versioned, outputs as dependencies. */
const sourceConfig = (s: string | OutputRef | readonly (string | OutputRef)[]) =>
  Array.isArray(s) ? s.map((x) => (isOutputRef(x) ? x : versioned(x))) : isOutputRef(s) ? s : versioned(s as string)

function nameOf(ref: ArtifactRef, kind: 'datasets' | 'classifiers', stepName: string): string {
  if (!ref.name.startsWith(`${kind}/`))
    throw new MarinError(
      'BAD_STEP',
      `step ${stepName}: its input is ${ref.name}@${ref.version}, not a ${kind.slice(0, -1)} ` +
        `(${kind}/<name>); give it the step that made one`,
    )
  return ref.name.slice(kind.length + 1)
}

export type WarcIngestStepOptions = {
  /** Step name and dataset name. */
  readonly name: string
  /** WARC files (`.warc`, `.warc.gz`): paths, globs, URLs, or other steps' outputs. */
  readonly source: string | OutputRef | readonly (string | OutputRef)[]
  /** Main text shorter than this counts as no main text. @default 25 */
  readonly minChars?: number
  /** Keep only these languages in the same pass (default: all, each tagged). */
  readonly languages?: readonly string[]
  /** With `languages`: the lowest language score kept. @default 0.5 */
  readonly threshold?: number
}

/** WARC responses → main text (Readability) tagged with its language (CLD3), as the dataset `<name>`. */
export function warcIngestStep(o: WarcIngestStepOptions): Step {
  return step({
    name: o.name,
    description: 'WARC pages → main text, language-tagged',
    config: {
      dataset: versioned(o.name),
      source: sourceConfig(o.source),
      minChars: versioned(o.minChars ?? 25),
      ...(o.languages ? { languages: versioned([...o.languages]), threshold: versioned(o.threshold ?? 0.5) } : {}),
    },
    fn: async (resolved, { outputPath, prefix, log }) => {
      const c = resolved as unknown as {
        dataset: string
        source: string | string[]
        minChars: number
        languages?: string[]
        threshold?: number
      }
      await prepareOutput(outputPath)
      const { ingestWarc } = await datakit()
      const r = await ingestWarc(c.dataset, {
        source: c.source,
        minChars: c.minChars,
        ...(c.languages ? { languages: c.languages, threshold: c.threshold } : {}),
        prefix,
      })
      log.info({ ref: r.ref, records: r.records, reused: r.reused }, 'extracted')
      await writeArtifacts(outputPath, { artifacts: [r.ref], records: r.records, web: r.stats })
    },
  })
}

export type LanguageFilterStepOptions = {
  readonly name: string
  readonly languages: readonly string[]
  /** The lowest language score kept. @default 0.5 */
  readonly threshold?: number
}

/** The documents of the dataset `input` made in `languages`, scored at least `threshold`, as the dataset `<name>`. */
export function languageFilterStep(input: Step, o: LanguageFilterStepOptions): Step {
  if (!Array.isArray(o.languages) || o.languages.length === 0)
    throw new MarinError('BAD_STEP', `step ${o.name}: languages is empty; give the codes to keep, e.g. ['en']`)
  return step({
    name: o.name,
    description: `keep ${o.languages.join(', ')}`,
    config: {
      input: input.artifact(),
      output: versioned(o.name),
      languages: versioned([...o.languages]),
      threshold: versioned(o.threshold ?? 0.5),
    },
    fn: async (c, { outputPath, prefix, log }) => {
      await prepareOutput(outputPath)
      const { filterLanguage } = await datakit()
      const ref = c.input as ArtifactRef
      const r = await filterLanguage(nameOf(ref, 'datasets', o.name), {
        version: ref.version,
        languages: c.languages,
        threshold: c.threshold,
        output: c.output,
        prefix,
      })
      log.info({ ref: r.ref, records: r.records, reused: r.reused }, 'filtered by language')
      await writeArtifacts(outputPath, { artifacts: [r.ref], records: r.records, web: r.stats })
    },
  })
}

export type QualityClassifierStepOptions = {
  /** Step name and classifier name (`classifiers/<name>`). */
  readonly name: string
  /** A file of fastText lines (`__label__hq text…`): a path, or another step's output. */
  readonly file: string | OutputRef
  /** fastText hyper-parameters; fastText's supervised defaults otherwise. */
  readonly args?: Partial<ClassifierArgs>
}

/** Trains a fastText-style classifier on labelled lines; its model file is the artifact `classifiers/<name>`. */
export function qualityClassifierStep(o: QualityClassifierStepOptions): Step {
  return step({
    name: o.name,
    description: 'train a fastText-style quality classifier',
    config: {
      classifier: versioned(o.name),
      file: sourceConfig(o.file),
      args: versioned(o.args ?? {}),
    },
    fn: async (resolved, { outputPath, prefix, log }) => {
      const c = resolved as unknown as { classifier: string; file: string; args: Partial<ClassifierArgs> }
      await prepareOutput(outputPath)
      const { trainQualityClassifier } = await datakit()
      const r = await trainQualityClassifier({ name: c.classifier, file: c.file, args: c.args, prefix })
      log.info({ ref: r.ref, reused: r.reused, ...r.stats }, 'trained the classifier')
      await writeArtifacts(outputPath, { artifacts: [r.ref], stats: r.stats, modelBytes: r.modelBytes })
    },
  })
}

export type QualityFilterStepOptions = {
  readonly name: string
  /** The `qualityClassifierStep` whose classifier scores the documents. */
  readonly classifier: Step
  /** The label whose probability is the score (`hq`). */
  readonly label: string
  /** Keep documents scoring at least this; or */
  readonly threshold?: number
  /** keep this fraction of the documents, the highest scores. */
  readonly topFraction?: number
  /** `filter` drops the rest, `annotate` keeps every document with its score. @default 'filter' */
  readonly mode?: 'filter' | 'annotate'
}

/** Scores every document of the dataset `input` made with the classifier and keeps the best, as dataset `<name>`. */
export function qualityFilterStep(input: Step, o: QualityFilterStepOptions): Step {
  if ((o.threshold === undefined) === (o.topFraction === undefined))
    throw new MarinError('BAD_STEP', `step ${o.name}: give exactly one of threshold and topFraction`)
  return step({
    name: o.name,
    description: `keep ${o.threshold !== undefined ? `${o.label} ≥ ${o.threshold}` : `the top ${o.topFraction}`}`,
    config: {
      input: input.artifact(),
      classifier: o.classifier.artifact(),
      output: versioned(o.name),
      label: versioned(o.label),
      mode: versioned(o.mode ?? 'filter'),
      ...(o.threshold !== undefined
        ? { threshold: versioned(o.threshold) }
        : { topFraction: versioned(o.topFraction!) }),
    },
    fn: async (resolved, { outputPath, prefix, log }) => {
      const c = resolved as unknown as {
        input: ArtifactRef
        classifier: ArtifactRef
        output: string
        label: string
        mode: 'filter' | 'annotate'
        threshold?: number
        topFraction?: number
      }
      await prepareOutput(outputPath)
      const { scoreQuality } = await datakit()
      nameOf(c.classifier, 'classifiers', o.name)
      const r = await scoreQuality(nameOf(c.input, 'datasets', o.name), {
        version: c.input.version,
        classifier: `${c.classifier.name}@${c.classifier.version}`,
        label: c.label,
        mode: c.mode,
        output: c.output,
        ...(c.threshold !== undefined ? { threshold: c.threshold } : { topFraction: c.topFraction! }),
        prefix,
      })
      log.info({ ref: r.ref, reused: r.reused, kept: r.report.kept, cut: r.report.cut }, 'scored')
      await writeArtifacts(outputPath, { artifacts: [r.ref], report: r.report })
    },
  })
}
