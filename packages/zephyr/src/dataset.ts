/**
 * @module `Dataset`: a lazy, immutable pipeline plan. Every method returns a
 * new Dataset; nothing runs until a `ZephyrContext` executes it.
 *
 * @example
 * const ds = Dataset.fromFiles('data/*.jsonl.gz')
 *   .loadJsonl<{ text: string; lang: string }>()
 *   .filter(col('lang').eq('en'))
 *   .map((r) => ({ text: r.text.trim() }))
 *   .writeParquet('out/part-{shard:05d}-of-{total:05d}.parquet')
 * const { outputs, counters } = await new ZephyrContext().execute(ds)
 */
import { ZephyrError } from './errors.js'
import { isExprBuilder } from './expr.js'
import type { ExprBuilder } from './expr.js'
import type { ShardInfo } from './fuse.js'
import type { KeySpec } from './keys.js'
import { opLabel } from './ops.js'
import type { Op, Source } from './ops.js'
import { checkPattern } from './output-pattern.js'
import type { ArrowReadOptions } from './readers/arrow.js'
import type { JsonlOptions } from './readers/jsonl.js'
import type { WarcOptions, WarcPage, WarcSkip } from './readers/warc.js'
import type { WikiPage, WikiXmlOptions } from './readers/wiki-xml.js'
import type { ParquetWriteOptions } from './writers/parquet.js'
import { checkFnSpec, isFunctionRef, snapshotArgs } from './user-fn.js'
import type { FnSpec } from './user-fn.js'

export type Row = Record<string, unknown>

function positiveInt(n: unknown, what: string): number {
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 1)
    throw new ZephyrError('INVALID_PLAN', `${what} must be a positive integer, got ${String(n)}`)
  return n
}

function keySpec(key: unknown, what: string): KeySpec {
  if (typeof key === 'string' || typeof key === 'function') return key as KeySpec
  if (isFunctionRef(key)) return checkFnSpec(key, `${what} key`) as KeySpec
  throw new ZephyrError(
    'INVALID_PLAN',
    `${what} key must be a field name, a function or fnRef(import.meta.url, 'name')`,
  )
}

export class Dataset<T> {
  private constructor(
    readonly source: Source,
    readonly ops: readonly Op[],
  ) {}

  /** One shard per file matching the glob (`*`, `**`, `?`, `{a,b}`); records are the file URLs. */
  static fromFiles(pattern: string): Dataset<string> {
    if (typeof pattern !== 'string' || pattern === '')
      throw new ZephyrError('INVALID_PLAN', 'fromFiles needs a glob or URL, e.g. "data/*.jsonl"')
    return new Dataset<string>({ kind: 'files', pattern }, [])
  }

  /** In-memory records split into `numShards` contiguous shards. @default numShards 1 */
  static fromList<T>(items: readonly T[], opts: { numShards?: number } = {}): Dataset<T> {
    if (!Array.isArray(items)) throw new ZephyrError('INVALID_PLAN', `fromList needs an array, got ${typeof items}`)
    return new Dataset<T>(
      { kind: 'list', items, numShards: positiveInt(opts.numShards ?? 1, 'fromList numShards') },
      [],
    )
  }

  /** Records from a (possibly async) iterable, as one shard. It is consumed once per run. */
  static fromIterable<T>(iterable: Iterable<T> | AsyncIterable<T>): Dataset<T> {
    if (
      iterable == null ||
      (typeof (iterable as Iterable<T>)[Symbol.iterator] !== 'function' &&
        typeof (iterable as AsyncIterable<T>)[Symbol.asyncIterator] !== 'function')
    ) {
      throw new ZephyrError('INVALID_PLAN', 'fromIterable needs an iterable or async iterable')
    }
    return new Dataset<T>({ kind: 'iterable', iterable }, [])
  }

  private append<U>(op: Op): Dataset<U> {
    const last = this.ops[this.ops.length - 1]
    if (last?.kind === 'write')
      throw new ZephyrError(
        'INVALID_PLAN',
        `${opLabel(op)} after ${opLabel(last)}: a writer must be the last operation of a pipeline`,
      )
    return new Dataset<U>(this.source, [...this.ops, op])
  }

  /** Each file → its JSON lines. Corrupt lines fail (naming file and line) or are skipped and counted. */
  loadJsonl<U = Row>(options: JsonlOptions = {}): Dataset<U> {
    if (options.onError !== undefined && options.onError !== 'fail' && options.onError !== 'skip') {
      throw new ZephyrError(
        'INVALID_PLAN',
        `loadJsonl onError must be 'fail' or 'skip', got ${String(options.onError)}`,
      )
    }
    checkMaxRecordBytes('loadJsonl', options.maxRecordBytes)
    return this.append({ kind: 'load', loader: { format: 'jsonl', options } })
  }

  /** Each file → its Parquet rows; `columns` projects, `filter` skips row groups by statistics. */
  loadParquet<U = Row>(options: { columns?: readonly string[]; filter?: ExprBuilder } = {}): Dataset<U> {
    const { columns, filter } = options
    return this.append({ kind: 'load', loader: { format: 'parquet', options: { columns, filter: filter?.expr } } })
  }

  /** Each file → its Arrow IPC rows (file or stream format). */
  loadArrow<U = Row>(options: ArrowReadOptions = {}): Dataset<U> {
    return this.append({ kind: 'load', loader: { format: 'arrow', options } })
  }

  /** Each file → one string per line, or one `{ path, text }` per file. */
  loadText(options?: { per?: 'line'; maxRecordBytes?: number }): Dataset<string>
  loadText(options: { per: 'file' }): Dataset<{ path: string; text: string }>
  loadText(options: { per?: 'line' | 'file'; maxRecordBytes?: number } = {}): Dataset<unknown> {
    if (options.per !== undefined && options.per !== 'line' && options.per !== 'file')
      throw new ZephyrError('INVALID_PLAN', `loadText per must be 'line' or 'file', got ${String(options.per)}`)
    checkMaxRecordBytes('loadText', options.maxRecordBytes)
    return this.append({ kind: 'load', loader: { format: 'text', options } })
  }

  /** Each MediaWiki XML export (plain, .gz or .bz2) → `{ id, title, text }` per page, text as plain text. */
  loadWikiXml(options: WikiXmlOptions = {}): Dataset<WikiPage> {
    return this.append({ kind: 'load', loader: { format: 'wikiXml', options } })
  }

  /**
   * Each WARC file (`.warc`, `.warc.gz`) → one `WarcPage` per `response` record with an HTML
   * payload (by default), decoded to text by its declared charset. Unreadable and too-large
   * records are skipped and counted (`skippedRecords`); with `emitSkipped` they also arrive as
   * `WarcSkip` records naming file and offset.
   */
  loadWarc(options?: WarcOptions & { emitSkipped?: false }): Dataset<WarcPage>
  loadWarc(options: WarcOptions & { emitSkipped: true }): Dataset<WarcPage | WarcSkip>
  loadWarc(options: WarcOptions = {}): Dataset<WarcPage | WarcSkip> {
    checkMaxRecordBytes('loadWarc', options.maxRecordBytes)
    if (options.onTruncated !== undefined && options.onTruncated !== 'error' && options.onTruncated !== 'stop')
      throw new ZephyrError(
        'INVALID_PLAN',
        `loadWarc onTruncated must be 'error' or 'stop', got ${String(options.onTruncated)}`,
      )
    if (options.contentTypes !== undefined && options.contentTypes !== '*' && !Array.isArray(options.contentTypes))
      throw new ZephyrError('INVALID_PLAN', `loadWarc contentTypes must be an array of media types or '*'`)
    return this.append({ kind: 'load', loader: { format: 'warc', options } })
  }

  /**
   * Each record → `f(record)`, or `f(record, args)` with bound `args`. `f` is a
   * function or `fnRef(import.meta.url, 'name')` (see `user-fn.ts` for what
   * travels to worker processes).
   */
  map<U>(f: FnSpec<(record: T) => U>): Dataset<U>
  map<U, A>(f: FnSpec<(record: T, args: A) => U>, opts: { args: A }): Dataset<U>
  map<U>(f: FnSpec, opts: { args?: unknown } = {}): Dataset<U> {
    return this.append({ kind: 'map', fn: checkFnSpec(f, 'map'), args: snapshotArgs(opts.args, 'map') })
  }

  /** Keeps records for which `pred` is truthy; an expression (`col('x').eq(1)`) can also skip Parquet row groups. */
  filter(pred: FnSpec<(record: T) => unknown> | ExprBuilder): Dataset<T>
  filter<A>(pred: FnSpec<(record: T, args: A) => unknown>, opts: { args: A }): Dataset<T>
  filter(pred: FnSpec | ExprBuilder, opts: { args?: unknown } = {}): Dataset<T> {
    if (isExprBuilder(pred)) return this.append({ kind: 'filterExpr', expr: pred.expr })
    return this.append({ kind: 'filter', fn: checkFnSpec(pred, 'filter'), args: snapshotArgs(opts.args, 'filter') })
  }

  flatMap<U>(f: FnSpec<(record: T) => Iterable<U>>): Dataset<U>
  flatMap<U, A>(f: FnSpec<(record: T, args: A) => Iterable<U>>, opts: { args: A }): Dataset<U>
  flatMap<U>(f: FnSpec, opts: { args?: unknown } = {}): Dataset<U> {
    return this.append({ kind: 'flatMap', fn: checkFnSpec(f, 'flatMap'), args: snapshotArgs(opts.args, 'flatMap') })
  }

  /** Keeps only these fields of each record. */
  select<K extends keyof T & string>(...columns: K[]): Dataset<Pick<T, K>> {
    if (columns.length === 0 || columns.some((c) => typeof c !== 'string'))
      throw new ZephyrError('INVALID_PLAN', 'select needs one or more field names')
    return this.append({ kind: 'select', columns })
  }

  /** A function over a whole shard's records (e.g. to batch model calls or keep state). */
  mapShard<U>(f: FnSpec<(records: AsyncIterable<T>, shard: ShardInfo) => Iterable<U> | AsyncIterable<U>>): Dataset<U>
  mapShard<U, A>(
    f: FnSpec<(records: AsyncIterable<T>, shard: ShardInfo, args: A) => Iterable<U> | AsyncIterable<U>>,
    opts: { args: A },
  ): Dataset<U>
  mapShard<U>(f: FnSpec, opts: { args?: unknown } = {}): Dataset<U> {
    return this.append({ kind: 'mapShard', fn: checkFnSpec(f, 'mapShard'), args: snapshotArgs(opts.args, 'mapShard') })
  }

  /** Consecutive records of a shard in arrays of `size` (the last may be shorter). */
  window(size: number): Dataset<T[]> {
    return this.append({ kind: 'window', size: positiveInt(size, 'window size') })
  }

  /** At most `n` records from each shard; reading stops once they are taken. */
  take(n: number): Dataset<T> {
    if (!Number.isInteger(n) || n < 0)
      throw new ZephyrError('INVALID_PLAN', `take needs a non-negative integer, got ${String(n)}`)
    return this.append({ kind: 'take', n })
  }

  /** Redistributes records evenly over `numShards` shards (a stage boundary). */
  reshard(numShards: number): Dataset<T> {
    return this.append({ kind: 'reshard', numShards: positiveInt(numShards, 'reshard numShards') })
  }

  /**
   * Groups records by key and reduces each group to one record (a stage boundary).
   * Groups larger in total than the memory budget spill to disk.
   * `opts.args` are bound to the reducer (its third argument).
   * @example ds.groupBy('lang', (lang, docs) => ({ lang, n: docs.length }), { numShards: 4 })
   */
  groupBy<R, K = unknown>(
    key: KeySpec<T>,
    reducer: FnSpec<(key: K, items: T[]) => R>,
    opts?: { numShards?: number },
  ): Dataset<R>
  groupBy<R, K, A>(
    key: KeySpec<T>,
    reducer: FnSpec<(key: K, items: T[], args: A) => R>,
    opts: { numShards?: number; args: A },
  ): Dataset<R>
  groupBy<R>(key: KeySpec<T>, reducer: FnSpec, opts: { numShards?: number; args?: unknown } = {}): Dataset<R> {
    return this.append({
      kind: 'groupBy',
      key: keySpec(key, 'groupBy'),
      reducer: checkFnSpec(reducer, 'groupBy reducer'),
      args: snapshotArgs(opts.args, 'groupBy'),
      numShards: opts.numShards === undefined ? undefined : positiveInt(opts.numShards, 'groupBy numShards'),
    })
  }

  /** Keeps the first record (in input order) of each key (a stage boundary). */
  deduplicate(key: KeySpec<T>, opts: { numShards?: number } = {}): Dataset<T> {
    return this.append({
      kind: 'deduplicate',
      key: keySpec(key, 'deduplicate'),
      numShards: opts.numShards === undefined ? undefined : positiveInt(opts.numShards, 'deduplicate numShards'),
    })
  }

  /** Writes each shard as JSON lines; `.gz`/`.zst` in the pattern compress. Records become the output URLs. */
  writeJsonl(pattern: string): Dataset<string> {
    return this.append({ kind: 'write', writer: { format: 'jsonl', pattern: checkPattern(pattern, 'writeJsonl') } })
  }

  writeParquet(pattern: string, options: ParquetWriteOptions = {}): Dataset<string> {
    return this.append({
      kind: 'write',
      writer: { format: 'parquet', pattern: checkPattern(pattern, 'writeParquet'), options },
    })
  }

  writeArrow(pattern: string): Dataset<string> {
    return this.append({ kind: 'write', writer: { format: 'arrow', pattern: checkPattern(pattern, 'writeArrow') } })
  }

  /** `fromFiles → loadJsonl → filter → map → writeParquet`. */
  describe(): string {
    return [
      this.source.kind === 'files' ? 'fromFiles' : this.source.kind === 'list' ? 'fromList' : 'fromIterable',
      ...this.ops.map(opLabel),
    ].join(' → ')
  }
}

function checkMaxRecordBytes(op: string, max: unknown): void {
  if (max !== undefined && !(typeof max === 'number' && Number.isSafeInteger(max) && max > 0))
    throw new ZephyrError(
      'INVALID_PLAN',
      `${op} maxRecordBytes must be a positive whole number of bytes, got ${String(max)}`,
    )
}
