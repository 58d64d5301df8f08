/**
 * @module Parquet writer (hyparquet-writer), streamed row group by row group
 * into an atomic storage write.
 *
 * The schema is inferred from the first row group: strings → STRING, numbers →
 * DOUBLE (exact for integers up to 2^53 and read back as numbers, unlike INT64),
 * bigints → INT64, booleans → BOOLEAN, Dates → TIMESTAMP, bytes → BYTE_ARRAY,
 * objects, arrays and mixed columns → JSON. Later rows must fit that schema.
 */
import { ByteWriter, ParquetWriter, schemaFromColumnData } from 'hyparquet-writer'
import type { BasicType } from 'hyparquet-writer'
import type { TaskCounters } from '../counters.js'
import { ZephyrError } from '../errors.js'
import { openOutput } from '../internal/output.js'
import type { Output } from '../internal/output.js'
import type { ShardWriter } from './writer.js'

export type ParquetWriteOptions = {
  /** Rows per row group at most. @default 50_000 */
  readonly rowGroupSize?: number
  /**
   * Approximate uncompressed bytes per row group: fewer rows when records are
   * large, so a writer holds tens of MB, not hundreds (which mostly feeds the
   * garbage collector). @default 16 MiB
   */
  readonly rowGroupBytes?: number
  /** Page codec. @default 'SNAPPY' */
  readonly codec?: 'SNAPPY' | 'UNCOMPRESSED'
  /** Column types to use instead of inferring them. */
  readonly types?: Readonly<Record<string, BasicType>>
}

function typeOf(v: unknown): BasicType | undefined {
  if (v === null || v === undefined) return undefined
  switch (typeof v) {
    case 'string':
      return 'STRING'
    case 'number':
      return 'DOUBLE'
    case 'bigint':
      return 'INT64'
    case 'boolean':
      return 'BOOLEAN'
  }
  if (v instanceof Date) return 'TIMESTAMP'
  if (v instanceof Uint8Array) return 'BYTE_ARRAY'
  return 'JSON'
}

/** A hyparquet `Writer` that hands each finished row group's bytes to an output stream. */
class StreamingByteWriter extends ByteWriter {
  constructor(private readonly out: Output) {
    super(1 << 20)
  }
  flush(): Promise<void> {
    const bytes = new Uint8Array(this.buffer.slice(0, this.index))
    this.index = 0
    return this.out.write(bytes)
  }
  override finish(): void {
    // the footer is flushed by the caller, which can await it
  }
}

/** Rough in-memory size of a record's values (strings by length), from a sample of rows. */
function bytesPerRow(rows: readonly unknown[]): number {
  const sample = rows.slice(0, 64)
  let bytes = 0
  for (const r of sample) {
    if (typeof r !== 'object' || r === null) continue
    for (const v of Object.values(r))
      bytes +=
        typeof v === 'string'
          ? v.length
          : v instanceof Uint8Array
            ? v.byteLength
            : typeof v === 'object' && v !== null
              ? 64
              : 8
  }
  return Math.max(1, bytes / Math.max(1, sample.length))
}

export async function parquetWriter(
  url: string,
  opts: ParquetWriteOptions = {},
  counters?: TaskCounters,
): Promise<ShardWriter> {
  const maxRows = opts.rowGroupSize ?? 50_000
  const targetBytes = opts.rowGroupBytes ?? 16 * 2 ** 20
  let rowGroupSize = 0 // set from the first batch
  // room for a row group's bytes: its write to disk overlaps encoding the next group
  const out = await openOutput(url, counters, 64 << 20)
  const sink = new StreamingByteWriter(out)
  let writer: ParquetWriter | undefined
  let columns: string[] = []
  let pending: unknown[] = []

  const writeGroup = async (rows: unknown[]) => {
    if (!writer) {
      const names = new Map<string, BasicType | 'MIXED' | undefined>()
      for (const r of rows) {
        if (typeof r !== 'object' || r === null || Array.isArray(r)) {
          throw new ZephyrError(
            'UNWRITABLE_RECORD',
            `${url}: Parquet rows must be objects, got ` +
              `${Array.isArray(r) ? 'an array' : typeof r}; map records to ` +
              `objects first`,
          )
        }
        for (const [k, v] of Object.entries(r)) {
          const t = typeOf(v)
          const seen = names.get(k)
          if (!names.has(k)) names.set(k, t)
          else if (t && seen === undefined) names.set(k, t)
          else if (t && seen !== t) names.set(k, 'MIXED')
        }
      }
      if (names.size === 0)
        throw new ZephyrError(
          'UNWRITABLE_RECORD',
          `${url}: the records have no fields; a Parquet file needs at least one column`,
        )
      columns = [...names.keys()]
      const columnData = columns.map((name) => {
        const t = opts.types?.[name] ?? names.get(name)
        return { name, data: [], type: t === 'MIXED' || t === undefined ? (t === 'MIXED' ? 'JSON' : 'STRING') : t } as {
          name: string
          data: unknown[]
          type: BasicType
        }
      })
      writer = new ParquetWriter({
        writer: sink,
        schema: schemaFromColumnData({ columnData: columnData as never }),
        codec: opts.codec ?? 'SNAPPY',
        createdBy: '@marin/zephyr',
      })
    }
    const columnData = columns.map((name) => ({
      name,
      data: rows.map((r) => (r as Record<string, unknown>)[name] ?? null),
    }))
    const known = new Set(columns)
    for (const r of rows) {
      for (const k of Object.keys(r as object)) {
        if (!known.has(k))
          throw new ZephyrError(
            'UNWRITABLE_RECORD',
            `${url}: field "${k}" is not in the Parquet schema (` +
              `${columns.join(', ')}), which was inferred from the first ` +
              `${rowGroupSize} rows; give every record the same fields`,
          )
      }
    }
    try {
      await writer.write({ columnData: columnData as never, rowGroupSize: rows.length })
    } catch (err) {
      if (err instanceof ZephyrError) throw err
      throw new ZephyrError(
        'UNWRITABLE_RECORD',
        `${url}: cannot encode rows as Parquet (${(err as Error).message}); check that each column keeps one type`,
        false,
        { cause: err },
      )
    }
  }

  return {
    async write(batch) {
      if (batch.length === 0) return // (a size of 0 would loop here for ever)
      rowGroupSize ||= Math.max(1, Math.min(maxRows, Math.round(targetBytes / bytesPerRow(batch))))
      for (const r of batch) pending.push(r)
      // whole groups off the front, then one copy of the rest (not one copy of the rest per group)
      let at = 0
      for (; pending.length - at >= rowGroupSize; at += rowGroupSize)
        await writeGroup(pending.slice(at, at + rowGroupSize))
      if (at > 0) pending = pending.slice(at)
    },
    async close() {
      if (pending.length || !writer) {
        if (!pending.length && !writer) {
          // an empty shard still gets a valid file, with a placeholder schema
          writer = new ParquetWriter({
            writer: sink,
            schema: [{ name: 'root', num_children: 0 }],
            createdBy: '@marin/zephyr',
          })
        } else await writeGroup(pending)
        pending = []
      }
      await writer!.finish()
      await sink.flush()
      await out.close()
    },
    abort: (err) => out.abort(err),
  }
}
