/**
 * @module Web steps: `ingestWarc` (WARC files → extracted, language-tagged documents) and
 * `filterLanguage` (a dataset → the documents in given languages, above a score).
 *
 * Two steps rather than one with both options: extraction is the expensive part (parsing every
 * page twice, HTML and main text), while the language threshold is what a researcher changes; as
 * a separate content-addressed step, a new threshold is a new version of the filter alone and the
 * extracted dataset is reused. `ingestWarc` still tags every document (CLD3 is cheap next to
 * Readability), and takes `languages` too for the one-pass case. Both run on zephyr workers, one
 * shard per input file or shard, and put their counts in the version metadata under `web`: pages
 * read, kept, no main text, skipped by reason (with the first skipped records' file and offset),
 * dropped by language, kept by language.
 *
 * @example
 * await ingestWarc('crawl', { source: 'warcs/*.warc.gz' })
 * await filterLanguage('crawl', { languages: ['en'], threshold: 0.5, output: 'crawl-en' })
 */
import { createHash } from 'node:crypto'
import { readFile, readdir, rm } from 'node:fs/promises'
import { join } from 'node:path'
import type { JsonObject } from '@marin/finestore'
import { logger } from '@marin/rigging'
import { Dataset, type ZephyrContext } from '@marin/zephyr'
import { findVersionByKey } from '../dataset/ingest.js'
import { openDataset, type OpenOptions } from '../dataset/open-dataset.js'
import type { DatakitRecord } from '../dataset/record.js'
import { summarizeShards } from '../dataset/shard-tally.js'
import { expandSources, fingerprint } from '../dataset/source-files.js'
import { DatakitError } from '../errors.js'
import { datasetArtifact, type StoreAccess, withStore, workDir } from '../store.js'
import { defaultContext } from '../zephyr-context.js'
import { DEFAULT_MAX_HTML_BYTES, DEFAULT_MAX_REPLACEMENT_FRACTION } from './extract.js'
import {
  addStats,
  emptyStats,
  LANGUAGE_FILTER,
  type LanguageFilterArgs,
  statsPath,
  WARC_DOCUMENTS,
  type WarcDocumentsArgs,
  type WebStats,
} from './web-shard.js'

const log = logger('datakit')

export type IngestWarcOptions = StoreAccess & {
  /** WARC files (`.warc`, `.warc.gz`): paths, globs or storage URLs. */
  readonly source: string | readonly string[]
  /** A WARC record whose payload is larger is skipped and counted. @default 16 MiB */
  readonly maxRecordBytes?: number
  /** HTML longer than this is not parsed (skipped as `htmlTooLarge`). @default 4 MiB */
  readonly maxHtmlBytes?: number
  /** Main text shorter than this counts as no main text. @default 25 */
  readonly minChars?: number
  /** Keep only these languages (default: all, tagged in meta). */
  readonly languages?: readonly string[]
  /** With `languages`: the lowest language score kept. @default 0.5 */
  readonly threshold?: number
  readonly context?: ZephyrContext
}

export type WebStepResult = {
  readonly name: string
  readonly version: number
  readonly ref: string
  readonly reused: boolean
  readonly records: number
  readonly stats: WebStats
}

function checkName(step: string, name: string): void {
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(name ?? ''))
    throw new DatakitError('INVALID_ARGUMENT', `${step}: name "${name}" must be letters, digits, ".", "_" or "-"`)
}

function checkThreshold(step: string, t: unknown): number {
  const v = t ?? 0.5
  if (typeof v !== 'number' || !(v >= 0 && v <= 1))
    throw new DatakitError('INVALID_ARGUMENT', `${step}: threshold must be a number from 0 to 1, got ${String(t)}`)
  return v
}

function checkLanguages(step: string, l: unknown, required: boolean): string[] | undefined {
  if (l === undefined && !required) return undefined
  if (!Array.isArray(l) || l.length === 0 || l.some((x) => typeof x !== 'string' || x === ''))
    throw new DatakitError('INVALID_ARGUMENT', `${step}: languages must be a non-empty list of codes, e.g. ['en']`)
  return [...l].sort()
}

async function sumStats(dir: string, files: readonly string[]): Promise<WebStats> {
  const total = emptyStats()
  for (const f of files) addStats(total, JSON.parse(await readFile(statsPath(join(dir, f)), 'utf8')) as WebStats)
  return total
}

async function finish(
  store: Parameters<Parameters<typeof withStore>[1]>[0],
  o: { name: string; dir: string; key: string; config: JsonObject; source: string; lineage: string[] },
): Promise<WebStepResult> {
  const files = (await readdir(o.dir)).filter((f) => /^part-\d+-of-\d+\.parquet$/.test(f)).sort()
  const stats = await sumStats(o.dir, files)
  const summary = await summarizeShards(
    files.map((f) => join(o.dir, f)),
    true,
  )
  if (summary.records === 0)
    throw new DatakitError(
      'SOURCE_EMPTY',
      `${o.source}: no documents left (${stats.pagesRead} pages read, ${stats.noMainText} without main text, ` +
        `${stats.droppedLanguage} in other languages); check the source and the filters`,
    )
  const metadata: JsonObject = {
    ...summary,
    shards: files.length,
    source: o.source,
    web: stats as unknown as JsonObject,
  }
  const artifact = datasetArtifact(o.name)
  const { version, ref } = await store.commit(
    artifact,
    async (txn) => {
      for (const f of files) await txn.put(f, { file: join(o.dir, f) })
    },
    { kind: 'datasets', metadata, config: { ...o.config, buildKey: o.key }, lineage: o.lineage, message: o.source },
  )
  await rm(o.dir, { recursive: true, force: true })
  log.info({ output: ref, pagesRead: stats.pagesRead, kept: stats.kept }, o.source)
  return { name: o.name, version, ref, reused: false, records: summary.records, stats }
}

async function reuse(store: Parameters<Parameters<typeof withStore>[1]>[0], name: string, key: string) {
  const artifact = datasetArtifact(name)
  const found = await findVersionByKey(store, artifact, key)
  if (found === undefined) return undefined
  const m = (await store.manifest(artifact, found)).metadata as { records: number; web: WebStats }
  return { name, version: found, ref: `${artifact}@${found}`, reused: true, records: m.records, stats: m.web }
}

/** WARC files → a dataset of main-text documents, tagged with their language. */
export async function ingestWarc(name: string, opts: IngestWarcOptions): Promise<WebStepResult> {
  checkName('ingestWarc', name)
  const languages = checkLanguages(`ingestWarc ${name}`, opts.languages, false)
  const threshold = checkThreshold(`ingestWarc ${name}`, opts.threshold)
  const patterns = typeof opts.source === 'string' ? [opts.source] : [...(opts.source ?? [])]
  const files = await expandSources(patterns)
  const prints: Awaited<ReturnType<typeof fingerprint>>[] = []
  for (const url of files) prints.push(await fingerprint(url, false))
  const config = {
    pass: 'ingestWarc',
    maxRecordBytes: opts.maxRecordBytes ?? 16 * 2 ** 20,
    maxHtmlBytes: opts.maxHtmlBytes ?? DEFAULT_MAX_HTML_BYTES,
    minChars: opts.minChars ?? 25,
    // main text more than 1 % U+FFFD is skipped as undecodable (part of the key: versions before the rule differ)
    maxReplacementFraction: DEFAULT_MAX_REPLACEMENT_FRACTION,
    languages: languages ?? null,
    threshold: languages ? threshold : null,
    extractor: '@mozilla/readability+linkedom',
    languageId: 'cld3-asm',
  }
  const contents = prints.map((p) => ({ sha256: p.sha256, bytes: p.bytes }))
  const key = createHash('sha256').update(JSON.stringify({ config, contents })).digest('hex')
  return withStore(opts, async (store) => {
    const found = await reuse(store, name, key)
    if (found) return found
    const dir = workDir(opts, 'ingest-warc', name, key.slice(0, 16))
    await rm(dir, { recursive: true, force: true })
    const args: WarcDocumentsArgs = {
      files,
      maxHtmlBytes: config.maxHtmlBytes,
      minChars: config.minChars,
      ...(languages ? { languages } : {}),
      threshold,
      output: `${dir}/part-{shard:05d}-of-{total:05d}.parquet`,
    }
    const ds = Dataset.fromList(files, { numShards: files.length })
      .loadWarc({ maxRecordBytes: config.maxRecordBytes, onTruncated: 'stop', emitSkipped: true })
      .mapShard(WARC_DOCUMENTS, { args })
      .writeParquet(args.output)
    await (opts.context ?? defaultContext()).execute(ds)
    return finish(store, {
      name,
      dir,
      key,
      config: {
        ...config,
        languages: config.languages,
        sources: prints.map((p) => ({ url: p.url, sha256: p.sha256 })),
      },
      source: `ingestWarc ${patterns.join(' ')}`,
      lineage: [],
    })
  })
}

export type FilterLanguageOptions = OpenOptions & {
  /** Languages to keep. */
  readonly languages: readonly string[]
  /** The lowest language score kept. @default 0.5 */
  readonly threshold?: number
  /** Dataset to write to. @default the input dataset (a new version of it) */
  readonly output?: string
  readonly context?: ZephyrContext
}

/** The documents of dataset `name` in the given languages (tagging any that are not tagged yet). */
export async function filterLanguage(name: string, opts: FilterLanguageOptions): Promise<WebStepResult> {
  const languages = checkLanguages(`filterLanguage ${name}`, opts.languages, true)!
  const threshold = checkThreshold(`filterLanguage ${name}`, opts.threshold)
  const input = await openDataset(name, opts)
  const outName = opts.output ?? name
  checkName('filterLanguage', outName)
  const config = { pass: 'filterLanguage', input: input.ref, languages, threshold, languageId: 'cld3-asm' }
  const key = createHash('sha256').update(JSON.stringify(config)).digest('hex')
  return withStore(opts, async (store) => {
    const found = await reuse(store, outName, key)
    if (found) return found
    const dir = workDir(opts, 'filter-language', outName, key.slice(0, 16))
    await rm(dir, { recursive: true, force: true })
    const args: LanguageFilterArgs = { languages, threshold, output: `${dir}/part-{shard:05d}-of-{total:05d}.parquet` }
    const ds = Dataset.fromList([...input.shards], { numShards: input.shards.length })
      .loadParquet<DatakitRecord>()
      .mapShard(LANGUAGE_FILTER, { args })
      .writeParquet(args.output)
    await (opts.context ?? defaultContext()).execute(ds)
    return finish(store, {
      name: outName,
      dir,
      key,
      config,
      source: `filterLanguage ${input.ref} to ${languages.join(',')} at ${threshold}`,
      lineage: [input.ref],
    })
  })
}
