/**
 * @module Steps for the usual data work, on datakit: ingest raw text into a
 * versioned dataset, deduplicate it, train a byte-level BPE tokenizer and
 * tokenize into a token cache. Each lists the finestore version it made in
 * `artifacts.json`; the next step puts `input.artifact()` in its config and gets it as an `ArtifactRef`.
 */
import type { IngestFormat } from '@marin/datakit'
import { MarinError } from '../errors.js'
import type { ArtifactRef } from '../executor/artifacts.js'
import { isOutputRef, step, type OutputRef, type Step } from '../executor/step.js'
import { versioned } from '../executor/versioned.js'
import { prepareOutput, writeArtifacts } from './artifacts.js'

// datakit (and zephyr's Parquet stack under it) load when a step runs, not when an experiment
// script imports @marin/marin: planning, dry runs and `marin status` stay light.
const datakit = () => import('@marin/datakit')

/** The datakit dataset a `datasets/<name>` artifact is; another kind of artifact is refused. */
function datasetOf(ref: ArtifactRef, stepName: string): { name: string; version: number } {
  if (!ref.name.startsWith('datasets/'))
    throw new MarinError(
      'BAD_STEP',
      `step ${stepName}: its input is ${ref.name}@${ref.version}, not ` +
        `a dataset (datasets/<name>); give it the step that made a dataset`,
    )
  return { name: ref.name.slice('datasets/'.length), version: ref.version }
}

export type IngestStepOptions = {
  /** Step name and dataset name. */
  readonly name: string
  /** Paths, globs or URLs; or another step's output (`prepare.output('docs.jsonl')`). */
  readonly source: string | readonly string[] | OutputRef
  readonly format: IngestFormat
  readonly textUnit?: 'file' | 'paragraph' | 'line'
}

/** Ingests `source` into the dataset `name`. */
export function ingestStep(o: IngestStepOptions): Step {
  return step({
    name: o.name,
    config: {
      dataset: versioned(o.name),
      source: isOutputRef(o.source) ? o.source : versioned(o.source),
      format: versioned(o.format),
      textUnit: versioned(o.textUnit ?? 'file'),
    },
    fn: async (c, { outputPath, prefix, log }) => {
      await prepareOutput(outputPath)
      const { ingest } = await datakit()
      const r = await ingest({ name: c.dataset, source: c.source, format: c.format, textUnit: c.textUnit, prefix })
      log.info({ ref: r.ref, records: r.records, reused: r.reused }, 'ingested')
      await writeArtifacts(outputPath, {
        artifacts: [r.ref],
        records: r.records,
        bytes: r.bytes,
        datasetHash: r.datasetHash,
      })
    },
  })
}

export type DedupStepOptions = {
  readonly name: string
  readonly exact?: boolean
  readonly fuzzy?: boolean
  /** Also remove paragraphs, and lines, seen earlier in the dataset (datakit's sub-document levels). */
  readonly paragraphs?: boolean
  readonly lines?: boolean
  readonly seed?: number
}

/** Exact and MinHash near-duplicate removal (and, on request, paragraph and line dedup) of the dataset `input` made;
 * writes `<name>` as a dataset. */
export function dedupStep(input: Step, o: DedupStepOptions): Step {
  return step({
    name: o.name,
    config: {
      input: input.artifact(),
      output: versioned(o.name),
      exact: versioned(o.exact ?? true),
      fuzzy: versioned(o.fuzzy ?? true),
      seed: versioned(o.seed ?? 42),
      // only when on, so the steps of existing experiments keep their hashes
      ...(o.paragraphs ? { paragraphs: versioned(true) } : {}),
      ...(o.lines ? { lines: versioned(true) } : {}),
    },
    fn: async (c, { outputPath, prefix, log }) => {
      await prepareOutput(outputPath)
      const { dedup } = await datakit()
      const ref = datasetOf(c.input, o.name)
      const r = await dedup(ref.name, {
        version: ref.version,
        output: c.output,
        exact: c.exact,
        fuzzy: c.fuzzy,
        seed: c.seed,
        paragraphs: c.paragraphs === true,
        lines: c.lines === true,
        prefix,
      })
      log.info({ ref: r.ref, kept: r.report.kept, documentsIn: r.report.documentsIn }, 'deduplicated')
      await writeArtifacts(outputPath, { artifacts: [r.ref], report: r.report })
    },
  })
}

export type TokenizeStepOptions = {
  readonly name: string
  /** Vocabulary of the tokenizer trained here; leave out with `tokenizer`. */
  readonly vocabSize?: number
  /**
   * Tokenize with the tokenizer of the token cache this other `tokenizeStep` made, instead of training one: the
   * sources of a training mixture must share one vocabulary.
   */
  readonly tokenizer?: Step
}

/** Trains a byte-level BPE tokenizer (`<|endoftext|>` appended) on the dataset `input` made, or takes the one of
 * `o.tokenizer`'s token cache, and tokenizes the dataset into the token cache `<name>`. */
export function tokenizeStep(input: Step, o: TokenizeStepOptions): Step {
  if ((o.vocabSize === undefined) === (o.tokenizer === undefined))
    throw new MarinError(
      'BAD_STEP',
      `step ${o.name}: give vocabSize (train a tokenizer) or tokenizer (reuse another tokenizeStep's), not ` +
        (o.vocabSize === undefined ? 'neither' : 'both'),
    )
  if (o.vocabSize !== undefined && !(Number.isInteger(o.vocabSize) && o.vocabSize > 0))
    throw new MarinError('BAD_STEP', `step ${o.name}: vocabSize ${o.vocabSize} must be a positive integer`)
  return step({
    name: o.name,
    config: {
      input: input.artifact(),
      cache: versioned(o.name),
      // the config of a step that trains its tokenizer is what it always was, so its version is too
      ...(o.tokenizer ? { tokenizer: o.tokenizer.artifact() } : { vocabSize: versioned(o.vocabSize!) }),
    },
    fn: async (c, { outputPath, prefix, log }) => {
      await prepareOutput(outputPath)
      const { buildTokenCache, openDataset, trainBpe } = await datakit()
      const { ParquetReader } = await import('@marin/zephyr')
      const ref = datasetOf(c.input, o.name)
      const ds = await openDataset(ref.name, { version: ref.version, prefix })
      // streamed: training keeps the distinct pieces and their counts, not the texts
      async function* texts(): AsyncGenerator<string> {
        for (const path of ds.shards)
          for await (const row of new ParquetReader({ path })) yield (row as { text: string }).text
      }
      const cfg = c as unknown as { vocabSize?: number; tokenizer?: ArtifactRef }
      const tokenizer = cfg.tokenizer
        ? await tokenizerOf(cfg.tokenizer, o.name, prefix)
        : await trainBpe(texts(), { vocabSize: cfg.vocabSize!, specialTokens: ['<|endoftext|>'] })
      const r = await buildTokenCache({ dataset: ref.name, version: ds.version, tokenizer, name: c.cache, prefix })
      log.info({ ref: r.ref, tokens: r.ledger.tokens }, 'tokenized')
      await writeArtifacts(outputPath, {
        artifacts: [r.ref],
        tokens: r.ledger.tokens,
        documents: r.ledger.documents,
        vocabSize: tokenizer.vocabSize,
      })
    },
  })
}

/** The tokenizer of the token cache `ref` names (`tokenizer.json` in its version). */
async function tokenizerOf(ref: ArtifactRef, stepName: string, prefix: string) {
  if (!ref.name.startsWith('token-caches/'))
    throw new MarinError(
      'BAD_STEP',
      `step ${stepName}: its tokenizer input is ${ref.name}@${ref.version}, not a token cache; give a tokenizeStep`,
    )
  const [{ BpeTokenizer }, { openStore, storeUrl }] = await Promise.all([datakit(), import('@marin/finestore')])
  const store = await openStore({ url: storeUrl(prefix) })
  try {
    const view = await store.open(`${ref.name}@${ref.version}`)
    const source = `${ref.name}@${ref.version}: tokenizer.json`
    return BpeTokenizer.fromJSON(JSON.parse(await view.readText('tokenizer.json')), source)
  } finally {
    store.close()
  }
}
