/**
 * @module Arrow IPC file writer. Types come from the first batch: strings →
 * Utf8, numbers → Float64, bigints → Int64, booleans → Bool, Dates →
 * TimestampMillisecond; objects, arrays and mixed columns are stored as JSON
 * text marked `zephyr:json` so that `loadArrow` returns them as values.
 */
import {
  Bool,
  Field,
  Float64,
  Int64,
  makeData,
  RecordBatch,
  RecordBatchFileWriter,
  Schema,
  Struct,
  TimestampMillisecond,
  Utf8,
  vectorFromArray,
} from 'apache-arrow'
import type { DataType } from 'apache-arrow'
import type { TaskCounters } from '../counters.js'
import { ZephyrError } from '../errors.js'
import { openOutput } from '../internal/output.js'
import { JSON_FIELD_META } from '../readers/arrow.js'
import type { ShardWriter } from './writer.js'

function kindOf(v: unknown): string | undefined {
  if (v === null || v === undefined) return undefined
  if (v instanceof Date) return 'date'
  if (typeof v === 'object') return 'json'
  return typeof v
}

function fieldFor(name: string, kind: string | undefined): Field {
  const json = new Map([[JSON_FIELD_META, 'true']])
  switch (kind) {
    case 'number':
      return new Field(name, new Float64(), true)
    case 'bigint':
      return new Field(name, new Int64(), true)
    case 'boolean':
      return new Field(name, new Bool(), true)
    case 'date':
      return new Field(name, new TimestampMillisecond(), true)
    case 'string':
    case undefined:
      return new Field(name, new Utf8(), true)
    default:
      return new Field(name, new Utf8(), true, json)
  }
}

export async function arrowWriter(url: string, counters?: TaskCounters): Promise<ShardWriter> {
  const out = await openOutput(url, counters)
  const writer = new RecordBatchFileWriter()
  let schema: Schema | undefined
  const pump = (async () => {
    for await (const chunk of writer) await out.write(chunk)
  })()
  pump.catch(() => {})

  const toBatch = (rows: readonly unknown[]): RecordBatch => {
    const s = schema!
    const children = s.fields.map((f) => {
      const json = f.metadata.get(JSON_FIELD_META) === 'true'
      const values = rows.map((r) => {
        const v = (r as Record<string, unknown>)[f.name]
        if (v === undefined || v === null) return null
        return json ? JSON.stringify(v) : v
      })
      try {
        return vectorFromArray(values, f.type as DataType).data[0]!
      } catch (err) {
        throw new ZephyrError(
          'UNWRITABLE_RECORD',
          `${url}: column "${f.name}" cannot hold a value of these rows (` +
            `${(err as Error).message}); give each field one type`,
          false,
          { cause: err },
        )
      }
    })
    return new RecordBatch(s, makeData({ type: new Struct(s.fields), length: rows.length, nullCount: 0, children }))
  }

  return {
    async write(batch) {
      if (!batch.length) return
      if (!schema) {
        const kinds = new Map<string, string | undefined>()
        for (const r of batch) {
          if (typeof r !== 'object' || r === null || Array.isArray(r))
            throw new ZephyrError(
              'UNWRITABLE_RECORD',
              `${url}: Arrow rows must be objects, got ${typeof r}; map records to objects first`,
            )
          for (const [k, v] of Object.entries(r)) {
            const kd = kindOf(v)
            const seen = kinds.get(k)
            if (!kinds.has(k) || seen === undefined) kinds.set(k, kd)
            else if (kd && kd !== seen) kinds.set(k, 'json')
          }
        }
        schema = new Schema([...kinds].map(([k, kd]) => fieldFor(k, kd)))
        writer.reset(undefined, schema)
      }
      for (const r of batch) {
        for (const k of Object.keys(r as object)) {
          if (!schema.fields.some((f) => f.name === k))
            throw new ZephyrError(
              'UNWRITABLE_RECORD',
              `${url}: field "${k}" is not in the Arrow schema inferred from ` +
                `the first batch; give every record the same fields`,
            )
        }
      }
      writer.write(toBatch(batch))
      await new Promise((r) => setImmediate(r))
    },
    async close() {
      if (!schema) writer.reset(undefined, new Schema([]))
      writer.finish()
      await pump
      await out.close()
    },
    async abort(err) {
      writer.abort?.()
      await out.abort(err)
    },
  }
}
