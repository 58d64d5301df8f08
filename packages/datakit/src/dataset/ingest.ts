/**
 * @module ingest: raw files → an immutable, versioned dataset in finestore. Records are
 * `{id, text, source, meta}` in Parquet shards `part-00000-of-000NN.parquet`, written by
 * zephyr into a work folder keyed by (source content, config), so a crashed run resumes
 * with the shards it finished, and an identical request returns the existing version.
 *
 * @example
 * const v = await ingest({ name: 'brown', source: 'corpus/*.jsonl', format: 'jsonl' })
 * v.ref // 'datasets/brown@1'
 */
import { createHash } from 'node:crypto'
import { readdir } from 'node:fs/promises'
import { join } from 'node:path'
import type { JsonObject, Store } from '@marin/finestore'
import { logger } from '@marin/rigging'
import { Dataset, isZephyrError, type ZephyrContext } from '@marin/zephyr'
import { DatakitError } from '../errors.js'
import { defaultContext } from '../zephyr-context.js'
import { datasetArtifact, withStore, workDir } from '../store.js'
import type { StoreAccess } from '../store.js'
import { expandSources, fingerprint } from './source-files.js'
import type { SourceFile } from './source-files.js'
import { INGEST_RECORDS } from './ingest-records.js'
import type { IngestArgs } from './ingest-records.js'
import { resolveNormalize } from './record.js'
import type { NormalizeConfig } from './record.js'
import { summarizeShards } from './shard-tally.js'

const log = logger('datakit')

/** Source formats; `text` splits files into documents by `textUnit`. */
export const INGEST_FORMATS = ['jsonl', 'parquet', 'text', 'wiki-xml'] as const
export type IngestFormat = (typeof INGEST_FORMATS)[number]

export type IngestOptions = StoreAccess & {
  /** Dataset name (`datasets/<name>` in finestore). */
  readonly name: string
  /** Local paths, globs or storage URLs (`file://`, `memory://`, `s3://`, `gs://`). */
  readonly source: string | readonly string[]
  readonly format: IngestFormat
  readonly normalize?: NormalizeConfig
  /** JSONL/Parquet field holding the text; other fields go to `meta`. @default 'text' */
  readonly textField?: string
  /** Plain text: one document per file, per blank-line-separated paragraph, or per line. @default 'file' */
  readonly textUnit?: 'file' | 'paragraph' | 'line'
  /** Invalid UTF-8 in a source file: replace with U+FFFD (counted) or refuse the file. @default 'replace' */
  readonly invalidUtf8?: 'replace' | 'refuse'
  /** A zephyr context to run on (pass one to reuse its workers across calls). @default datakit's shared context on
   * worker processes */
  readonly context?: ZephyrContext
}

/** What ingest made (or found already made). */
export type IngestResult = {
  readonly name: string
  readonly version: number
  /** `datasets/<name>@<version>` */
  readonly ref: string
  /** True when an identical earlier ingest was returned without work. */
  readonly reused: boolean
  readonly records: number
  readonly bytes: number
  readonly datasetHash: string
  readonly invalidUtf8: number
}

/** Manifest metadata of a dataset version. */
export type DatasetMetadata = {
  records: number
  bytes: number
  datasetHash: string
  shards: number
  source: string
  [k: string]: unknown
}

/** The source files, loaded by format: one shard per file. */
function loader(files: string[], opts: IngestOptions): Dataset<unknown> {
  const base = Dataset.fromList(files, { numShards: files.length })
  switch (opts.format) {
    case 'jsonl':
      return base.loadJsonl()
    case 'parquet':
      return base.loadParquet()
    case 'wiki-xml':
      return base.loadWikiXml()
    case 'text':
      return base.loadText({ per: 'file' })
    default:
      throw new DatakitError(
        'INVALID_ARGUMENT',
        `ingest ${opts.name}: unknown format "${String(opts.format)}"; use one of ${INGEST_FORMATS.join(', ')}`,
      )
  }
}

/** A zephyr failure of our own record function is bad input (e.g. a missing text field): say so as a DatakitError. */
export function asDatakitError(err: unknown, what: string): unknown {
  if (isZephyrError(err) && err.code === 'USER_FUNCTION_FAILED')
    return new DatakitError('INVALID_ARGUMENT', `${what}: ${err.message}`, { cause: err })
  return err
}

/** An earlier version built with exactly this ingest key, if any. */
export async function findVersionByKey(store: Store, artifact: string, key: string): Promise<number | undefined> {
  if ((await store.head(artifact)) === undefined) return undefined
  for (const v of await store.versions(artifact)) {
    if ((await store.manifest(artifact, v)).config.buildKey === key) return v
  }
  return undefined
}

/** Ingests a source into a new dataset version, or returns the version an identical ingest made. */
export async function ingest(opts: IngestOptions): Promise<IngestResult> {
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(opts.name ?? '')) {
    throw new DatakitError('INVALID_ARGUMENT', `ingest: name "${opts.name}" must be letters, digits, ".", "_" or "-"`)
  }
  if (!(INGEST_FORMATS as readonly string[]).includes(opts.format)) {
    throw new DatakitError(
      'INVALID_ARGUMENT',
      `ingest ${opts.name}: format "${String(opts.format)}" is not one of ${INGEST_FORMATS.join(', ')}`,
    )
  }
  const patterns = typeof opts.source === 'string' ? [opts.source] : [...opts.source]
  const files = await expandSources(patterns)
  const policy = opts.invalidUtf8 ?? 'replace'
  const prints: SourceFile[] = []
  for (const url of files) {
    const fp = await fingerprint(url, opts.format !== 'parquet')
    if (fp.invalidUtf8 > 0 && policy === 'refuse') {
      throw new DatakitError(
        'INVALID_UTF8',
        `ingest ${opts.name}: ${url} holds ${fp.invalidUtf8} invalid ` +
          `UTF-8 sequence(s); fix the file or pass invalidUtf8: 'replace'`,
      )
    }
    prints.push(fp)
  }
  if (prints.every((p) => p.bytes === 0)) {
    throw new DatakitError(
      'SOURCE_EMPTY',
      `ingest ${opts.name}: every source file is empty (${files.join(', ')}); nothing to ingest`,
    )
  }
  const config = {
    format: opts.format,
    normalize: resolveNormalize(opts.normalize),
    textField: opts.textField ?? 'text',
    textUnit: opts.textUnit ?? 'file',
    invalidUtf8: policy,
  }
  const contents = prints.map((p) => ({ sha256: p.sha256, bytes: p.bytes }))
  const ingestKey = createHash('sha256').update(JSON.stringify({ config, contents })).digest('hex')
  const artifact = datasetArtifact(opts.name)
  const invalidUtf8 = prints.reduce((a, p) => a + p.invalidUtf8, 0)

  return withStore(opts, async (store) => {
    const existing = await findVersionByKey(store, artifact, ingestKey)
    if (existing !== undefined) {
      const m = (await store.manifest(artifact, existing)).metadata as DatasetMetadata
      log.info({ artifact, version: existing }, 'same source and config already ingested; reusing')
      return {
        name: opts.name,
        version: existing,
        ref: `${artifact}@${existing}`,
        reused: true,
        records: m.records,
        bytes: m.bytes,
        datasetHash: m.datasetHash,
        invalidUtf8,
      }
    }
    const dir = workDir(opts, 'ingest', opts.name, ingestKey.slice(0, 16))
    const args: IngestArgs = {
      name: opts.name,
      format: opts.format,
      files,
      textField: config.textField,
      textUnit: config.textUnit,
      normalize: config.normalize,
      output: `${dir}/part-{shard:05d}-of-{total:05d}.parquet`,
    }
    const ds = loader(files, opts).mapShard(INGEST_RECORDS, { args }).writeParquet(args.output)
    try {
      await (opts.context ?? defaultContext()).execute(ds, { skipExisting: true })
    } catch (err) {
      throw asDatakitError(err, `ingest ${opts.name}`)
    }
    const shards = (await readdir(dir)).filter((f) => /^part-\d+-of-\d+\.parquet$/.test(f)).sort()
    // Tallied as the shards were written: nothing is read back.
    const summary = await summarizeShards(
      shards.map((f) => join(dir, f)),
      true,
    )
    if (summary.records === 0) {
      throw new DatakitError(
        'SOURCE_EMPTY',
        `ingest ${opts.name}: no documents left in ${files.length} ` +
          `file(s) after normalization (${patterns.join(', ')}); check ` +
          `format, textField and minChars`,
      )
    }
    const metadata: JsonObject = {
      ...summary,
      shards: shards.length,
      source: patterns.join(' '),
      format: opts.format,
      sourceFiles: files.length,
      sourceBytes: prints.reduce((a, p) => a + p.bytes, 0),
      invalidUtf8,
    }
    const { version } = await store.commit(
      artifact,
      async (txn) => {
        for (const f of shards) await txn.put(f, { file: join(dir, f) })
      },
      {
        kind: 'datasets',
        metadata,
        config: {
          ...config,
          buildKey: ingestKey,
          sources: prints.map((p) => ({ url: p.url, sha256: p.sha256, bytes: p.bytes })),
        },
        message: `ingest ${patterns.join(' ')}`,
      },
    )
    log.info({ artifact, version, records: summary.records }, 'ingested')
    return {
      name: opts.name,
      version,
      ref: `${artifact}@${version}`,
      reused: false,
      records: summary.records,
      bytes: summary.bytes,
      datasetHash: summary.datasetHash,
      invalidUtf8,
    }
  })
}
