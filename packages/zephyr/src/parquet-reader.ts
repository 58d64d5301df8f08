/**
 * @module `ParquetReader`: the records of one Parquet file at any storage URL.
 *
 * Decoding is hyparquet's, with hyparquet-compressors for gzip/zstd/brotli/lz4
 * pages (snappy is built in). Row groups are read one at a time, so memory is
 * bounded by the largest group, and a group whose min/max statistics prove that
 * no row can satisfy `filter` is skipped without reading its pages.
 *
 * Files from others are data: the footer is checked against the file's size,
 * and each group's page headers against the footer, before hyparquet decodes
 * anything (`internal/parquet-checks.ts`), so a doctored count fails at once
 * as `CORRUPT_PARQUET` instead of allocating for rows that are not there. A
 * group's chunks are fetched once for that check and handed to hyparquet.
 */
import { open } from 'node:fs/promises'
import type { AsyncBuffer, FileMetaData, RowGroup, parquetSchema } from 'hyparquet'
import { isRiggingError } from '@marin/rigging'
import type { TaskCounters } from './counters.js'
import { ZephyrError } from './errors.js'
import { evaluate, exprColumns, isExprBuilder, mayMatch } from './expr.js'
import type { ColumnStats, Expr, ExprBuilder } from './expr.js'
import { localCopy } from './internal/cache.js'
import { notFound } from './internal/byte-streams.js'
import { locate } from './internal/location.js'
import { hyparquet } from './internal/hyparquet.js'
import { checkGroupMemory, checkPages, chunkBytes, readFooter } from './internal/parquet-checks.js'

export type ParquetReaderOptions = {
  /** A URL (`file://`, `memory://`, `s3://`…) or a local path. */
  readonly path: string
  /** Read only these top-level columns. @default all */
  readonly columns?: readonly string[]
  /** Keep only rows matching this; row groups that cannot match are skipped. */
  readonly filter?: Expr | ExprBuilder
  /** Where bytes read and skipped row groups are counted. */
  readonly counters?: TaskCounters
}

/**
 * @example
 * for await (const row of new ParquetReader({ path: 's3://b/x.parquet', columns: ['text'] })) use(row)
 */
export class ParquetReader implements AsyncIterable<Record<string, unknown>> {
  readonly path: string
  private readonly columns: readonly string[] | undefined
  private readonly filter: Expr | undefined
  private readonly counters: TaskCounters | undefined
  private file: Promise<{ buffer: AsyncBuffer; close(): Promise<void> }> | undefined

  constructor(opts: ParquetReaderOptions) {
    this.path = opts.path
    this.columns = opts.columns
    this.filter = isExprBuilder(opts.filter) ? opts.filter.expr : opts.filter
    this.counters = opts.counters
  }

  private corrupt(err: unknown): ZephyrError {
    if (err instanceof ZephyrError) return err
    return new ZephyrError(
      'CORRUPT_PARQUET',
      `${this.path}: not a readable Parquet file (` +
        `${(err as Error).message}); the file may be truncated or not ` +
        `Parquet — rewrite it or drop it from the input`,
      false,
      { cause: err },
    )
  }

  private async openFile(): Promise<{ buffer: AsyncBuffer; close(): Promise<void> }> {
    const loc = await locate(this.path)
    const counters = this.counters
    const own = loc.storage.localPath(loc.path)
    let local: string | undefined
    try {
      local = own ?? (await localCopy(loc, counters))
    } catch (err) {
      throw isRiggingError(err, 'STORAGE_NOT_FOUND') ? notFound(this.path, err) : err
    }
    if (local !== undefined) {
      let fh
      try {
        fh = await open(local, 'r')
      } catch (err) {
        throw (err as NodeJS.ErrnoException).code === 'ENOENT' ? notFound(this.path, err) : err
      }
      const { size } = await fh.stat()
      const handle = fh
      return {
        buffer: {
          byteLength: size,
          async slice(start, end = size) {
            const buf = new Uint8Array(Math.max(0, end - start))
            let off = 0
            while (off < buf.length) {
              const { bytesRead } = await handle.read(buf, off, buf.length - off, start + off)
              if (bytesRead === 0) break
              off += bytesRead
            }
            // a cached copy was counted while it downloaded
            if (counters && own !== undefined) counters.bytesRead += off
            return buf.buffer
          },
        },
        close: () => handle.close(),
      }
    }
    const info = await loc.storage.stat(loc.path)
    if (!info) throw notFound(this.path, undefined)
    return {
      buffer: {
        byteLength: info.size,
        async slice(start, end = info.size) {
          const chunks: Buffer[] = []
          try {
            for await (const c of await loc.storage.readStream(loc.path, { start, end })) chunks.push(c as Buffer)
          } catch (err) {
            throw isRiggingError(err, 'STORAGE_NOT_FOUND') ? notFound(loc.url, err) : err
          }
          const b = Buffer.concat(chunks)
          if (counters) counters.bytesRead += b.length
          return b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength) as ArrayBuffer
        },
      },
      close: async () => {},
    }
  }

  /** The file's footer: schema, row groups and their statistics. */
  async metadata(): Promise<FileMetaData> {
    this.file ??= this.openFile()
    const { buffer } = await this.file
    try {
      return await readFooter(buffer, this.path)
    } catch (err) {
      throw this.corrupt(err)
    }
  }

  /** Releases the file `metadata()` opened (reading all batches closes it by itself). */
  async close(): Promise<void> {
    const file = this.file
    this.file = undefined
    if (file) await (await file).close()
  }

  /** Rows in batches, one batch per row group read. */
  async *batches(): AsyncGenerator<Record<string, unknown>[]> {
    this.file ??= this.openFile()
    const file = await this.file
    try {
      const metadata = await this.metadata()
      const { parquetReadObjects, parquetSchema, compressors } = await hyparquet()
      const tree = parquetSchema(metadata)
      const names = new Set(tree.children.map((c) => c.element.name))
      for (const c of this.columns ?? []) {
        if (!names.has(c))
          throw new ZephyrError(
            'INVALID_PLAN',
            `${this.path}: no column "${c}" (columns: ${[...names].join(', ')}); fix the projection`,
          )
      }
      const extra =
        this.filter && this.columns ? exprColumns(this.filter).filter((c) => !this.columns!.includes(c)) : []
      const readColumns = this.columns ? [...this.columns, ...extra] : undefined
      let rowStart = 0
      for (const [rowGroupIndex, group] of metadata.row_groups.entries()) {
        const n = Number(group.num_rows)
        const start = rowStart
        rowStart += n
        if (n === 0) continue
        if (this.filter && !mayMatch(this.filter, (c) => groupStats(group, c))) {
          if (this.counters) this.counters.rowGroupsSkipped++
          continue
        }
        let rows: Record<string, unknown>[]
        try {
          const checked = await this.checkedGroup(file.buffer, tree, group, rowGroupIndex, readColumns)
          rows = await parquetReadObjects({
            file: checked,
            metadata,
            columns: readColumns as string[] | undefined,
            rowStart: start,
            rowEnd: start + n,
            compressors,
          })
        } catch (err) {
          throw this.corrupt(err)
        }
        if (this.filter) {
          const f = this.filter
          rows = rows.filter((r) => evaluate(f, r))
          if (extra.length) for (const r of rows) for (const c of extra) delete r[c]
        }
        if (rows.length) yield rows
      }
    } finally {
      this.file = undefined
      await file.close()
    }
  }

  /**
   * Fetches the chunks of `group` that will be read, checks their pages and
   * the memory decoding needs, and returns a view of the file that serves
   * those bytes from memory (hyparquet asks for the same ranges, or inside them).
   */
  private async checkedGroup(
    file: AsyncBuffer,
    leaves: ReturnType<typeof parquetSchema>,
    group: RowGroup,
    g: number,
    columns: readonly string[] | undefined,
  ): Promise<AsyncBuffer> {
    const chunks = group.columns.filter((c) => !columns || columns.includes(c.meta_data!.path_in_schema[0]!))
    // neighbouring chunks (8 KiB apart at most, as hyparquet joins them) in one read
    const ranges: { start: number; end: number }[] = []
    for (const r of chunks.map((c) => chunkBytes(c.meta_data!)).sort((a, b) => a.start - b.start)) {
      const last = ranges[ranges.length - 1]
      if (last && r.start <= last.end + (1 << 13)) last.end = Math.max(last.end, r.end)
      else ranges.push({ ...r })
    }
    const fetched = await Promise.all(ranges.map(async (r) => ({ ...r, bytes: await file.slice(r.start, r.end) })))
    const { parquetHeader } = await hyparquet()
    let uncompressed = 0
    let values = 0
    for (const c of chunks) {
      const m = c.meta_data!
      const { start, end } = chunkBytes(m)
      const f = fetched.find((x) => x.start <= start && end <= x.end)!
      const element = leafElement(leaves, m.path_in_schema)
      const totals = checkPages(
        new Uint8Array(f.bytes, start - f.start, end - start),
        m,
        element,
        Number(group.num_rows),
        `row group ${g}, column "${m.path_in_schema.join('.')}"`,
        this.path,
        parquetHeader,
      )
      uncompressed += totals.uncompressed
      values += totals.values
    }
    checkGroupMemory(group, g, chunks.length, { uncompressed, values }, this.path)
    return {
      byteLength: file.byteLength,
      slice(start, end = file.byteLength) {
        const f = fetched.find((x) => x.start <= start && end <= x.end)
        return f ? f.bytes.slice(start - f.start, end - f.start) : file.slice(start, end)
      },
    }
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<Record<string, unknown>> {
    for await (const batch of this.batches()) yield* batch
  }
}

/** Min/max/null count of a top-level column in one row group, when the writer recorded them. */
function groupStats(group: RowGroup, column: string): ColumnStats | undefined {
  const chunk = group.columns.find(
    (c) => c.meta_data?.path_in_schema.length === 1 && c.meta_data.path_in_schema[0] === column,
  )
  const s = chunk?.meta_data?.statistics
  if (!s) return undefined
  // The deprecated min/max fields sorted strings as signed bytes in old writers: trust them for numbers only.
  const legacy = (v: unknown) => (typeof v === 'number' || typeof v === 'bigint' ? v : undefined)
  const min = s.min_value ?? legacy(s.min)
  // A max marked inexact was truncated; trust only exact or unmarked bounds.
  const max = s.is_max_value_exact === false ? undefined : (s.max_value ?? legacy(s.max))
  return {
    min: min instanceof Date ? undefined : min,
    max: max instanceof Date ? undefined : max,
    nullCount: s.null_count === undefined ? undefined : Number(s.null_count),
    numRows: Number(group.num_rows),
  }
}

/** The schema element of the leaf column at `path`. */
function leafElement(root: ReturnType<typeof parquetSchema>, path: readonly string[]) {
  let node = root
  for (const name of path) node = node.children.find((c) => c.element.name === name) ?? node
  return node.element
}
