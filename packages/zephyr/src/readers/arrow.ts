/**
 * @module Arrow IPC reader (file or stream format), streaming record batches.
 * Columns written by zephyr as JSON text (field metadata `zephyr:json`) come back as values.
 */
import { DataType, RecordBatchReader } from 'apache-arrow'
import type { RecordBatch } from 'apache-arrow'
import type { TaskCounters } from '../counters.js'
import { ZephyrError } from '../errors.js'
import { openInput } from '../internal/input.js'

export type ArrowReadOptions = {
  /** Read only these columns. @default all */
  readonly columns?: readonly string[]
}

export const JSON_FIELD_META = 'zephyr:json'

export function batchToRows(batch: RecordBatch, columns?: readonly string[]): Record<string, unknown>[] {
  const fields = batch.schema.fields.filter((f) => !columns || columns.includes(f.name))
  const n = batch.numRows
  const rows: Record<string, unknown>[] = new Array(n)
  for (let i = 0; i < n; i++) rows[i] = {}
  for (const f of fields) {
    const vec = batch.getChild(f.name)
    if (!vec) continue
    const json = f.metadata.get(JSON_FIELD_META) === 'true'
    const timestamp = DataType.isTimestamp(f.type) || DataType.isDate(f.type)
    let i = 0
    for (const v of vec) {
      let value: unknown = v ?? null
      if (json && typeof value === 'string') value = JSON.parse(value)
      else if (timestamp && (typeof value === 'number' || typeof value === 'bigint')) value = new Date(Number(value))
      else if (value !== null && typeof value === 'object' && 'toJSON' in value && !(value instanceof Date))
        value = (value as { toJSON(): unknown }).toJSON()
      rows[i++]![f.name] = value
    }
  }
  return rows
}

export async function* readArrow(
  url: string,
  opts: ArrowReadOptions = {},
  counters?: TaskCounters,
): AsyncGenerator<Record<string, unknown>[]> {
  const input = await openInput(url, counters)
  let reader
  try {
    reader = await RecordBatchReader.from(input as unknown as AsyncIterable<Uint8Array>)
    const names = reader.schema?.fields.map((f) => f.name) ?? []
    for (const c of opts.columns ?? []) {
      if (names.length && !names.includes(c))
        throw new ZephyrError(
          'INVALID_PLAN',
          `${url}: no column "${c}" (columns: ${names.join(', ')}); fix the projection`,
        )
    }
    for await (const batch of reader as AsyncIterable<RecordBatch>) {
      if (batch.numRows) yield batchToRows(batch, opts.columns)
    }
  } catch (err) {
    if (err instanceof ZephyrError) throw err
    throw new ZephyrError(
      'CORRUPT_ARROW',
      `${url}: not a readable Arrow IPC file (${(err as Error).message}); the file may be truncated — rewrite it`,
      false,
      { cause: err },
    )
  } finally {
    // the reader may stop before the end of the input (an error, or a consumer that stops early)
    input.destroy()
  }
}
