/**
 * @module Checks of a Parquet file's footer and pages against its size, before anything is decoded.
 *
 * hyparquet believes the counts a footer states: a 136-byte file whose footer
 * claimed 2^31 rows ran for 78 s and aborted the process out of memory. Here
 * the footer's own length, its row counts (file, row groups, column chunks)
 * and each chunk's byte range are checked against the file; then, for each
 * row group read, the page headers actually present (their sizes, value
 * counts and dictionary sizes) are checked against the footer; and the memory
 * the decoded group needs is compared with what the heap has free. A file
 * that fails is `CORRUPT_PARQUET` naming it, at once.
 */
import { getHeapStatistics } from 'node:v8'
import type { AsyncBuffer, ColumnMetaData, FileMetaData, RowGroup, SchemaElement } from 'hyparquet'
import type { parquetHeader } from 'hyparquet/src/column.js'
import { ZephyrError } from '../errors.js'
import { hyparquet } from './hyparquet.js'

const MAGIC = 0x31524150
const INITIAL_FETCH = 1 << 19

function corrupt(path: string, what: string): ZephyrError {
  return new ZephyrError(
    'CORRUPT_PARQUET',
    `${path}: not a readable Parquet file (${what}); the file is damaged or was not written by a Parquet ` +
      `writer — rewrite it or drop it from the input`,
  )
}

function count(v: number | bigint | undefined, path: string, what: string): number {
  const n = typeof v === 'bigint' ? Number(v) : v
  if (n === undefined || !Number.isSafeInteger(n) || n < 0) throw corrupt(path, `${what} is ${String(v)}`)
  return n
}

/** Where the footer starts: column chunks must end before it. */
function footerStart(meta: FileMetaData, size: number): number {
  return size - 8 - meta.metadata_length
}

/** Reads the footer (with hyparquet's parser) after checking its length against the file, then checks it. */
export async function readFooter(file: AsyncBuffer, path: string): Promise<FileMetaData> {
  const size = file.byteLength
  if (size < 12) throw corrupt(path, `${size} bytes is too short for a Parquet file (at least 12)`)
  const tailStart = Math.max(0, size - INITIAL_FETCH)
  const tail = new Uint8Array(await file.slice(tailStart, size))
  const view = new DataView(tail.buffer, tail.byteOffset, tail.byteLength)
  if (view.getUint32(tail.length - 4, true) !== MAGIC) throw corrupt(path, 'no "PAR1" at the end: truncated?')
  const length = view.getUint32(tail.length - 8, true)
  // the footer, its length and two magic numbers must fit in the file
  if (length > size - 12) throw corrupt(path, `the footer claims ${length} bytes of a ${size}-byte file`)
  let footer = tail
  if (length + 8 > tail.length) {
    footer = new Uint8Array(length + 8)
    footer.set(new Uint8Array(await file.slice(size - 8 - length, tailStart)))
    footer.set(tail, tailStart - (size - 8 - length))
  }
  const { parquetMetadata } = await hyparquet()
  let meta: FileMetaData
  try {
    meta = parquetMetadata(footer.subarray(footer.length - 8 - length))
  } catch (err) {
    throw corrupt(path, `its footer does not parse: ${(err as Error).message}`)
  }
  checkFooter(meta, size, path)
  return meta
}

/** A leaf column: its chunk's `num_values` is its row count exactly when nothing above it repeats. */
type Leaf = { readonly path: string; readonly repeated: boolean; readonly element: SchemaElement }

function leaves(schema: readonly SchemaElement[], path: string): Leaf[] {
  const out: Leaf[] = []
  let next = 1
  const walk = (index: number, names: string[], repeated: boolean) => {
    const e = schema[index]!
    const children = e.num_children ?? 0
    if (!Number.isSafeInteger(children) || children < 0 || children > schema.length - next)
      throw corrupt(path, `schema element "${e.name}" claims ${children} children of ${schema.length} elements`)
    if (children === 0 && index > 0) out.push({ path: names.join('.'), repeated, element: e })
    for (let c = 0; c < children; c++) {
      const child = next++
      const ce = schema[child]!
      walk(child, [...names, ce.name], repeated || ce.repetition_type === 'REPEATED')
    }
  }
  if (schema.length === 0) throw corrupt(path, 'the schema is empty')
  walk(0, [], false)
  if (next !== schema.length) throw corrupt(path, `the schema tree holds ${next} of its ${schema.length} elements`)
  return out
}

/** Footer counts against each other and the file's size. */
export function checkFooter(meta: FileMetaData, size: number, path: string): void {
  const cols = leaves(meta.schema, path)
  const end = footerStart(meta, size)
  let rows = 0
  meta.row_groups.forEach((group, g) => {
    const n = count(group.num_rows, path, `row group ${g}'s num_rows`)
    rows += n
    if (group.columns.length !== cols.length)
      throw corrupt(path, `row group ${g} has ${group.columns.length} column chunks for ${cols.length} columns`)
    group.columns.forEach((chunk, c) => {
      const where = `row group ${g}, column "${cols[c]!.path}"`
      const m = chunk.meta_data
      if (!m) throw corrupt(path, `${where} has no column metadata`)
      if (chunk.file_path) throw corrupt(path, `${where} is in another file (${chunk.file_path}), not supported`)
      if (m.path_in_schema.join('.') !== cols[c]!.path)
        throw corrupt(path, `${where}: its chunk is for "${m.path_in_schema.join('.')}"`)
      if (m.codec === undefined) throw corrupt(path, `${where} has an unknown compression codec`)
      const values = count(m.num_values, path, `${where}'s num_values`)
      if (cols[c]!.repeated ? values < n : values !== n)
        throw corrupt(path, `${where} holds ${values} values for the ${n} rows the row group claims`)
      const { start, bytes } = chunkRange(m, path, where)
      if (start < 4 || start + bytes > end)
        throw corrupt(path, `${where} claims bytes ${start}-${start + bytes}, outside the data (4-${end})`)
    })
  })
  const total = count(meta.num_rows, path, 'num_rows')
  if (total !== rows) throw corrupt(path, `the footer claims ${total} rows but its row groups hold ${rows}`)
}

function chunkRange(m: ColumnMetaData, path: string, where: string): { start: number; bytes: number } {
  const start = count(m.dictionary_page_offset || m.data_page_offset, path, `${where}'s page offset`)
  const bytes = count(m.total_compressed_size, path, `${where}'s total_compressed_size`)
  return { start, bytes }
}

/** Smallest encoded size of one PLAIN value of each type, for dictionary pages. */
function plainBytes(e: SchemaElement): number {
  switch (e.type) {
    case 'BOOLEAN':
      return 1 / 8
    case 'INT32':
    case 'FLOAT':
      return 4
    case 'INT64':
    case 'DOUBLE':
      return 8
    case 'INT96':
      return 12
    case 'FIXED_LEN_BYTE_ARRAY':
      return e.type_length ?? 0
    default:
      return 4 // BYTE_ARRAY: a 4-byte length each
  }
}

function readVarint(bytes: Uint8Array, at: number): number {
  let result = 0
  for (let shift = 0; shift < 35 && at < bytes.length; shift += 7) {
    const b = bytes[at++]!
    result += (b & 0x7f) * 2 ** shift
    if (!(b & 0x80)) return result
  }
  return -1
}

/** What a row group's pages say, summed. */
type PageTotals = { readonly uncompressed: number; readonly values: number }

/**
 * Walks the page headers of one column chunk (its bytes in hand) and checks them against the footer;
 * `readHeader` is hyparquet's page-header parser (`hyparquet()` loads it).
 */
export function checkPages(
  bytes: Uint8Array,
  m: ColumnMetaData,
  element: SchemaElement,
  rows: number,
  where: string,
  path: string,
  readHeader: typeof parquetHeader,
): PageTotals {
  const declared = Number(m.num_values)
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const reader = { view, offset: 0 }
  let values = 0
  let v2Rows = 0
  let v2 = false
  let uncompressed = 0
  let pages = 0
  while (values < declared) {
    if (reader.offset >= bytes.length)
      throw corrupt(path, `${where}: its pages hold ${values} of the ${declared} values the footer claims`)
    const at = reader.offset
    let h: ReturnType<typeof parquetHeader>
    try {
      h = readHeader(reader)
    } catch (err) {
      throw corrupt(path, `${where}: page header at chunk byte ${at} does not parse (${(err as Error).message})`)
    }
    const page = `${where}, page ${pages++}`
    const size = count(h.compressed_page_size, path, `${page}'s compressed size`)
    const full = count(h.uncompressed_page_size, path, `${page}'s uncompressed size`)
    if (reader.offset + size > bytes.length)
      throw corrupt(path, `${page} claims ${size} bytes, past the end of its column chunk`)
    const body = bytes.subarray(reader.offset, reader.offset + size)
    reader.offset += size
    uncompressed += full
    let levels = 0
    if (h.type === 'DICTIONARY_PAGE') {
      if (pages !== 1) throw corrupt(path, `${page} is a dictionary page after data pages`)
      const n = count(h.dictionary_page_header?.num_values, path, `${page}'s dictionary size`)
      if (n * plainBytes(element) > full) throw corrupt(path, `${page} claims ${n} dictionary values in ${full} bytes`)
    } else if (h.type === 'DATA_PAGE') {
      values += count(h.data_page_header?.num_values, path, `${page}'s num_values`)
    } else if (h.type === 'DATA_PAGE_V2') {
      const d = h.data_page_header_v2
      const n = count(d?.num_values, path, `${page}'s num_values`)
      const r = count(d?.num_rows, path, `${page}'s num_rows`)
      levels =
        count(d?.definition_levels_byte_length, path, `${page}'s definition levels length`) +
        count(d?.repetition_levels_byte_length, path, `${page}'s repetition levels length`)
      if (r > n || levels > size || levels > full)
        throw corrupt(path, `${page} claims ${r} rows, ${n} values and ${levels} bytes of levels in ${size} bytes`)
      values += n
      v2Rows += r
      v2 = true
      if (d?.is_compressed === false && full !== size)
        throw corrupt(path, `${page} is uncompressed but claims ${full} bytes of ${size}`)
    } else {
      throw corrupt(path, `${page} has the unsupported page type ${String(h.type)}`)
    }
    if (m.codec === 'UNCOMPRESSED' && full !== size)
      throw corrupt(path, `${page} is uncompressed but claims ${full} bytes of ${size}`)
    // snappy states the decoded length first: it must be what the header claims
    if (m.codec === 'SNAPPY' && !(h.type === 'DATA_PAGE_V2' && h.data_page_header_v2?.is_compressed === false)) {
      const said = readVarint(body, levels)
      if (said !== full - levels)
        throw corrupt(path, `${page} claims ${full - levels} bytes decoded, its snappy data ${said}`)
    }
  }
  if (values !== declared)
    throw corrupt(path, `${where}: its pages hold ${values} values, the footer claims ${declared}`)
  if (v2 && v2Rows !== rows) throw corrupt(path, `${where}: its pages hold ${v2Rows} rows, the footer claims ${rows}`)
  return { uncompressed, values }
}

/**
 * Fails before decoding when a row group's rows (a JS object each) and
 * decoded pages would not fit in the heap's free space: a footer can claim
 * billions of rows of one repeated value in a few bytes of RLE.
 */
export function checkGroupMemory(group: RowGroup, g: number, columns: number, totals: PageTotals, path: string): void {
  const rows = Number(group.num_rows)
  const need = rows * (32 + 16 * columns) + totals.uncompressed + totals.values * 8
  const heap = getHeapStatistics()
  const free = heap.heap_size_limit - heap.used_heap_size
  if (need > free) {
    const gib = (b: number) => `${(b / 2 ** 30).toFixed(1)} GiB`
    throw new ZephyrError(
      'MEMORY_BUDGET_EXCEEDED',
      `${path}: row group ${g} holds ${rows} rows of ${columns} columns, about ${gib(need)} decoded, more than ` +
        `the ${gib(free)} this process has free; rewrite the file with smaller row groups (writeParquet's ` +
        `rowGroupSize) or give node more memory (--max-old-space-size)`,
    )
  }
}

/** The byte range of a chunk, from its (already checked) footer entry. */
export function chunkBytes(m: ColumnMetaData): { start: number; end: number } {
  const start = Number(m.dictionary_page_offset || m.data_page_offset)
  return { start, end: start + Number(m.total_compressed_size) }
}
