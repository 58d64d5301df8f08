/**
 * @module The first rows of a dataset version for the report, reading only what is shown: the first lines of a
 * JSONL shard (plain or `.gz`), streamed and bounded in bytes, or the first rows of a Parquet shard read by range
 * (footer, then only the columns shown). A row of thousands of keys shows its first columns and says how many
 * were left out, so no page grows wider than a screen of columns.
 */
import type { Readable } from 'node:stream'
import { pipeline } from 'node:stream'
import { createGunzip } from 'node:zlib'
import type { ArtifactView } from '@marin/finestore'
import type { DatasetRows } from './types.js'

/** Rows shown per dataset, and how much of a text cell. */
const DATASET_ROWS = 5
const TEXT_CELL_CHARS = 160
const OTHER_CELL_CHARS = 60
/** Columns shown of a dataset's rows (`id` and `text` first); the others are counted, not shown. */
export const MAX_COLUMNS = 12
/** The most bytes of a JSONL shard (decompressed) read for its first rows. */
export const ROWS_MAX_BYTES = 4 * 1024 * 1024

/** `s` cut to `n` characters, with an ellipsis when it was longer. */
function shorten(s: string, n: number): string {
  // Only the start is looked at: a cell may be megabytes long.
  const head = s.length > n * 4 + 16 ? s.slice(0, n * 4 + 16) : s
  const flat = head.replace(/\s+/g, ' ')
  return flat.length > n || head !== s ? `${flat.slice(0, n - 1)}…` : flat
}

/**
 * The lines of `stream` (decoded as UTF-8), stopping once `maxBytes` were read; the stream is destroyed when the
 * caller stops early. `cut` is set when the byte budget ended the reading inside a line.
 */
export async function* linesOf(stream: Readable, maxBytes: number, cut?: { cut: boolean }): AsyncGenerator<string> {
  const decoder = new TextDecoder()
  let pending = ''
  let read = 0
  try {
    for await (const chunk of stream as AsyncIterable<Uint8Array>) {
      read += chunk.byteLength
      pending += decoder.decode(chunk, { stream: true })
      let start = 0
      for (let nl = pending.indexOf('\n'); nl >= 0; nl = pending.indexOf('\n', start)) {
        yield pending.slice(start, nl)
        start = nl + 1
      }
      pending = pending.slice(start)
      if (read >= maxBytes) {
        if (cut && pending !== '') cut.cut = true
        return
      }
    }
    pending += decoder.decode()
    if (pending !== '') yield pending
  } finally {
    stream.destroy()
  }
}

/** Whether a file of a dataset version can give its first rows. */
const SHOWN_FILE = /\.(jsonl|jsonl\.gz|parquet)$/

/**
 * The first rows of a dataset version: its first JSONL, JSONL.gz or Parquet file (a plain line is a `text`).
 * `blobUrl` is where the Parquet file's bytes can be read by range (the store's blob of that file).
 */
export async function datasetRows(
  view: ArtifactView,
  blobUrl: (file: string) => string,
  scrub: (text: string) => string = (t) => t,
): Promise<DatasetRows | undefined> {
  const file = view
    .files()
    .filter((f) => SHOWN_FILE.test(f))
    .sort()[0]
  if (!file) return undefined
  if (file.endsWith('.parquet')) return parquetRows(file, blobUrl(file), scrub)
  const records: Record<string, unknown>[] = []
  const raw = await view.readStream(file)
  const stream = file.endsWith('.gz') ? pipeline(raw, createGunzip(), () => {}) : raw
  const cut = { cut: false }
  for await (const line of linesOf(stream, ROWS_MAX_BYTES, cut)) {
    if (!line.trim()) continue
    let o: unknown
    try {
      o = JSON.parse(line)
    } catch {
      o = undefined
    }
    records.push(o && typeof o === 'object' && !Array.isArray(o) ? (o as Record<string, unknown>) : { text: line })
    if (records.length >= DATASET_ROWS) break
  }
  if (records.length === 0 && cut.cut)
    throw new Error(`the first line of ${file} is longer than the ${ROWS_MAX_BYTES} bytes the report reads for rows`)
  return tabulate(file, records, undefined, scrub)
}

/** The first rows of a Parquet file: its footer says the columns, and only those shown are read. */
async function parquetRows(file: string, url: string, scrub: (text: string) => string): Promise<DatasetRows> {
  const { ParquetReader } = await import('@marin/zephyr')
  // The footer's reader holds the file open (a local blob) until closed.
  const footer = new ParquetReader({ path: url })
  let meta: Awaited<ReturnType<InstanceType<typeof ParquetReader>['metadata']>>
  try {
    meta = await footer.metadata()
  } finally {
    await footer.close()
  }
  // The schema's top-level fields: children of the root, each followed by its own children.
  const names: string[] = []
  for (let i = 1; i < meta.schema.length; ) {
    const el = meta.schema[i]!
    names.push(el.name)
    i += 1 + countDescendants(meta.schema, i)
  }
  const { shown, omitted } = pickColumns(names)
  const records: Record<string, unknown>[] = []
  const reader = new ParquetReader({ path: url, columns: shown })
  try {
    for await (const r of reader) {
      records.push(r)
      if (records.length >= DATASET_ROWS) break
    }
  } finally {
    await reader.close()
  }
  return { ...tabulate(file, records, shown, scrub), ...(omitted > 0 ? { omittedColumns: omitted } : {}) }
}

function countDescendants(schema: readonly { num_children?: number }[], at: number): number {
  let n = 0
  let open = schema[at]!.num_children ?? 0
  for (let i = at + 1; open > 0 && i < schema.length; i++, n++) open += (schema[i]!.num_children ?? 0) - 1
  return n
}

/** `id` and `text` first, then the others in order, at most `MAX_COLUMNS`. */
function pickColumns(names: readonly string[]): { shown: string[]; omitted: number } {
  const first = ['id', 'text'].filter((k) => names.includes(k))
  const all = [...first, ...names.filter((k) => !first.includes(k))]
  return { shown: all.slice(0, MAX_COLUMNS), omitted: Math.max(0, all.length - MAX_COLUMNS) }
}

/**
 * Cells of the first rows: `id` and `text` first, objects as JSON, everything shortened (after `scrub`, so that a
 * secret cut short is still found), at most `MAX_COLUMNS`.
 */
function tabulate(
  file: string,
  records: readonly Record<string, unknown>[],
  known?: string[],
  scrub: (text: string) => string = (t) => t,
): DatasetRows {
  const seen = new Set<string>(known)
  if (!known) for (const r of records) for (const k of Object.keys(r)) seen.add(k)
  const { shown, omitted } = pickColumns([...seen])
  const cell = (k: string, v: unknown) => {
    if (v === undefined || v === null) return ''
    const text = typeof v === 'string' ? v : typeof v === 'bigint' ? v.toString() : JSON.stringify(v, bigints)
    return shorten(scrub(text), k === 'text' ? TEXT_CELL_CHARS : OTHER_CELL_CHARS)
  }
  return {
    file,
    columns: shown.map((k) => shorten(scrub(k), OTHER_CELL_CHARS)),
    rows: records.map((r) => shown.map((k) => cell(k, Object.hasOwn(r, k) ? r[k] : undefined))),
    ...(omitted > 0 ? { omittedColumns: omitted } : {}),
  }
}

const bigints = (_k: string, v: unknown) => (typeof v === 'bigint' ? v.toString() : v)
