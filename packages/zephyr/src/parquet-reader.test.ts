import { execFile } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { parquetMetadata } from 'hyparquet'
import { describe, expect, test } from 'vitest'
import { ZephyrContext } from './context.js'
import { emptyTaskCounters } from './counters.js'
import { Dataset } from './dataset.js'
import { col } from './expr.js'
import { craftedParquet } from './fixtures/parquet-craft.js'
import { foreignParquet, readForeign } from './fixtures/parquet-wasm.js'
import type { ForeignCodec } from './fixtures/parquet-wasm.js'
import { tempDir } from './fixtures/tmp.js'
import { checkGroupMemory } from './internal/parquet-checks.js'
import { ParquetReader } from './parquet-reader.js'
import { parquetWriter } from './writers/parquet.js'

const ctx = new ZephyrContext({ inProcess: true, progress: 'off' })
const N = 5000
const langs = ['en', 'fr', 'de', 'es']
// sorted by lang, as a crawler's output often is, so row groups have narrow lang ranges
const rows = Array.from({ length: N }, (_, i) => ({
  id: i,
  lang: langs[Math.floor((i * langs.length) / N)]!,
  score: (i % 100) / 100,
  text: `text number ${i}`,
}))
const columns = {
  id: Int32Array.from(rows.map((r) => r.id)),
  lang: rows.map((r) => r.lang),
  score: Float64Array.from(rows.map((r) => r.score)),
  text: rows.map((r) => r.text),
}

describe('Parquet from another writer', () => {
  test.each<ForeignCodec>(['SNAPPY', 'GZIP', 'ZSTD', 'UNCOMPRESSED'])('%s pages are read correctly', async (codec) => {
    const dir = tempDir()
    const bytes = foreignParquet(columns, codec)
    const meta = parquetMetadata(
      bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer,
    )
    expect(new Set(meta.row_groups.flatMap((g) => g.columns.map((c) => c.meta_data!.codec)))).toEqual(new Set([codec]))
    expect(meta.created_by).toMatch(/parquet-rs/)
    writeFileSync(join(dir, 'x.parquet'), bytes)
    const got: unknown[] = []
    for await (const r of new ParquetReader({ path: join(dir, 'x.parquet') })) got.push(r)
    expect(got).toEqual(rows)
  })

  test('column projection reads only the named columns', async () => {
    const dir = tempDir()
    writeFileSync(join(dir, 'x.parquet'), foreignParquet(columns, 'ZSTD'))
    const r = await ctx.execute(Dataset.fromFiles(join(dir, 'x.parquet')).loadParquet({ columns: ['id', 'lang'] }))
    expect(r.results).toEqual(rows.map(({ id, lang }) => ({ id, lang })))
  })

  test('an expression filter skips row groups by statistics and filters rows', async () => {
    const dir = tempDir()
    writeFileSync(join(dir, 'x.parquet'), foreignParquet(columns, 'SNAPPY', 500))
    const counters = emptyTaskCounters()
    const got: unknown[] = []
    for await (const r of new ParquetReader({
      path: join(dir, 'x.parquet'),
      columns: ['id'],
      filter: col('lang').eq('fr'),
      counters,
    }))
      got.push(r)
    expect(got).toEqual(rows.filter((r) => r.lang === 'fr').map(({ id }) => ({ id })))
    // 10 groups of 500 rows; only the groups holding 'fr' (ids 1250..2499) can match
    expect(counters.rowGroupsSkipped).toBe(7)
  })

  test('a filter after loadParquet is pushed into the reader', async () => {
    const dir = tempDir()
    writeFileSync(join(dir, 'x.parquet'), foreignParquet(columns, 'GZIP', 500))
    const ds = Dataset.fromFiles(join(dir, 'x.parquet'))
      .loadParquet()
      .filter(col('id').lt(600).and(col('score').gte(0.5)))
      .select('id')
    const [stage] = await ctx.plan(ds)
    expect(stage!.ops.map((o) => o.kind)).toEqual(['load'])
    const r = await ctx.execute(ds)
    expect(r.results).toEqual(rows.filter((x) => x.id < 600 && x.score >= 0.5).map(({ id }) => ({ id })))
    expect(r.counters[0]!.rowGroupsSkipped).toBe(8)
  })

  test('a truncated file is a CORRUPT_PARQUET error naming the file', async () => {
    const dir = tempDir()
    const bytes = foreignParquet(columns, 'SNAPPY')
    writeFileSync(join(dir, 'cut.parquet'), bytes.subarray(0, bytes.length - 100))
    await expect(ctx.execute(Dataset.fromFiles(join(dir, 'cut.parquet')).loadParquet())).rejects.toMatchObject({
      code: 'CORRUPT_PARQUET',
      message: expect.stringMatching(/cut\.parquet: not a readable Parquet file.*truncated/),
    })
    writeFileSync(
      join(dir, 'mid.parquet'),
      Buffer.concat([bytes.subarray(0, 2000), bytes.subarray(bytes.length - 3000)]),
    )
    await expect(ctx.execute(Dataset.fromFiles(join(dir, 'mid.parquet')).loadParquet())).rejects.toMatchObject({
      code: 'CORRUPT_PARQUET',
      message: expect.stringContaining('mid.parquet'),
    })
  })

  test('ParquetReader reads any storage URL with ranged reads, and reports a missing file', async () => {
    await ctx.execute(
      Dataset.fromList(rows).writeParquet('memory://zephyr-reader/x-{shard}.parquet', { rowGroupSize: 1000 }),
    )
    const counters = emptyTaskCounters()
    const reader = new ParquetReader({
      path: 'memory://zephyr-reader/x-0.parquet',
      columns: ['id', 'lang'],
      filter: col('id').gte(4500),
      counters,
    })
    const got: unknown[] = []
    for await (const r of reader) got.push(r)
    expect(got).toEqual(rows.filter((r) => r.id >= 4500).map(({ id, lang }) => ({ id, lang })))
    expect(counters.rowGroupsSkipped).toBe(4)
    const whole = (await new ParquetReader({ path: 'memory://zephyr-reader/x-0.parquet' }).metadata()).num_rows
    expect(Number(whole)).toBe(N)
    await expect(new ParquetReader({ path: 'memory://zephyr-reader/none.parquet' }).metadata()).rejects.toMatchObject({
      code: 'INPUT_NOT_FOUND',
      message: expect.stringContaining('none.parquet'),
    })
  })

  test('close() releases the file that metadata() opened', async () => {
    const dir = tempDir()
    const path = join(dir, 'meta.parquet')
    await ctx.execute(Dataset.fromList(rows.slice(0, 10)).writeParquet(join(dir, 'meta-{shard}.parquet')))
    const { renameSync, readdirSync, readlinkSync } = await import('node:fs')
    renameSync(join(dir, 'meta-0.parquet'), path)
    const open = () =>
      readdirSync('/proc/self/fd').filter((fd) => {
        try {
          return readlinkSync(`/proc/self/fd/${fd}`) === path
        } catch {
          return false
        }
      }).length
    const reader = new ParquetReader({ path })
    expect(Number((await reader.metadata()).num_rows)).toBe(10)
    expect(open()).toBe(1)
    await reader.close()
    expect(open()).toBe(0)
    await reader.close() // twice is fine
  })

  test('a missing column in the projection is an INVALID_PLAN error', async () => {
    const dir = tempDir()
    writeFileSync(join(dir, 'x.parquet'), foreignParquet(columns, 'SNAPPY'))
    await expect(
      ctx.execute(Dataset.fromFiles(join(dir, 'x.parquet')).loadParquet({ columns: ['nope'] })),
    ).rejects.toMatchObject({ code: 'INVALID_PLAN', message: expect.stringMatching(/no column "nope"/) })
  })
})

describe('writeParquet', () => {
  test('round trip keeps types: strings, numbers, bigints, booleans, nulls, nested values', async () => {
    const dir = tempDir()
    const docs = Array.from({ length: 1200 }, (_, i) => ({
      id: i,
      big: BigInt(i) * 10_000_000_000n,
      ok: i % 2 === 0,
      text: i % 5 ? `t${i}` : null,
      meta: { tags: ['a', i] },
      score: i / 3,
    }))
    const w = await ctx.execute(
      Dataset.fromList(docs, { numShards: 2 }).writeParquet(join(dir, 'part-{shard:05d}-of-{total:05d}.parquet'), {
        rowGroupSize: 250,
      }),
    )
    expect(w.outputs).toHaveLength(2)
    const back = await ctx.execute(Dataset.fromFiles(join(dir, '*.parquet')).loadParquet())
    expect(back.results).toEqual(docs)
    const meta = parquetMetadata(readFileSync(w.outputs[0]!).buffer as ArrayBuffer)
    expect(meta.row_groups.map((g) => Number(g.num_rows))).toEqual([250, 250, 100])
  })

  test('large records make smaller row groups (rowGroupBytes), small ones stop at rowGroupSize', async () => {
    const dir = tempDir()
    const big = Array.from({ length: 100 }, (_, i) => ({ id: i, text: String(i % 10).repeat(10_000) }))
    const w = await ctx.execute(
      Dataset.fromList(big).writeParquet(join(dir, 'big-{shard}.parquet'), { rowGroupBytes: 100_000 }),
    )
    const groups = (url: string) =>
      parquetMetadata(new Uint8Array(readFileSync(url)).buffer).row_groups.map((g) => Number(g.num_rows))
    expect(groups(w.outputs[0]!)).toEqual(Array(10).fill(10))
    const small = Array.from({ length: 300 }, (_, i) => ({ id: i }))
    const s = await ctx.execute(
      Dataset.fromList(small).writeParquet(join(dir, 'small-{shard}.parquet'), {
        rowGroupBytes: 100_000,
        rowGroupSize: 128,
      }),
    )
    expect(groups(s.outputs[0]!)).toEqual([128, 128, 44])
  })

  test('empty batches (a filter that kept nothing) write nothing, before or after rows', async () => {
    const url = join(tempDir(), 'part.parquet')
    const w = await parquetWriter(url)
    await w.write([])
    await w.write([{ id: 1 }, { id: 2 }])
    await w.write([])
    await w.close()
    const back = await ctx.execute(Dataset.fromFiles(url).loadParquet())
    expect(back.results).toEqual([{ id: 1 }, { id: 2 }])
  })

  test('files zephyr writes are read by another implementation (arrow-rs via parquet-wasm)', async () => {
    const dir = tempDir()
    const docs = Array.from({ length: 3000 }, (_, i) => ({
      id: i,
      big: BigInt(i) * 3n,
      ok: i % 2 === 0,
      text: i % 5 ? `t${i} ${'é'.repeat(i % 4)}` : null,
      score: i / 7,
    }))
    const w = await ctx.execute(
      Dataset.fromList(docs).writeParquet(join(dir, 'part-{shard}.parquet'), { rowGroupSize: 1000 }),
    )
    expect(readForeign(readFileSync(w.outputs[0]!))).toEqual(docs)
  })

  test('a record with a field outside the inferred schema is UNWRITABLE_RECORD; nothing is left behind', async () => {
    const dir = tempDir()
    const docs = [{ a: 1 }, { a: 2 }, { a: 3, b: 'surprise' }]
    await expect(
      ctx.execute(Dataset.fromList(docs).writeParquet(join(dir, 'p-{shard}.parquet'), { rowGroupSize: 2 })),
    ).rejects.toMatchObject({ code: 'UNWRITABLE_RECORD', message: expect.stringContaining('"b"') })
    const { readdirSync } = await import('node:fs')
    expect(readdirSync(dir).filter((f) => f.endsWith('.parquet'))).toEqual([])
  })
})

describe('Parquet footers from others', () => {
  const readAll = async (path: string) => {
    const got: unknown[] = []
    for await (const r of new ParquetReader({ path })) got.push(r)
    return got
  }

  test('a footer claiming 2^31 rows over 3 values fails at once, not after 78 s out of memory', async () => {
    const path = join(tempDir(), 'rows.parquet')
    writeFileSync(
      path,
      craftedParquet((m) => {
        m.num_rows = 2n ** 31n
        m.row_groups[0]!.num_rows = 2n ** 31n
        m.row_groups[0]!.columns[0]!.meta_data!.num_values = 2n ** 31n
      }),
    )
    expect(readFileSync(path).length).toBeLessThan(300)
    // in a child with a small heap: before, this aborted the process after a minute at 100% CPU
    const script = fileURLToPath(new URL('./fixtures/read-first.ts', import.meta.url))
    const run = promisify(execFile)(
      process.execPath,
      ['--max-old-space-size=256', '--import', 'tsx', script, '10', path],
      {
        timeout: 20_000,
      },
    )
    const failed = (await run.then(
      () => undefined,
      (err: { killed: boolean; stderr: string }) => err,
    ))!
    expect(failed.killed).toBe(false)
    expect(failed.stderr).toContain("code: 'CORRUPT_PARQUET'")
    expect(failed.stderr).toMatch(
      /rows\.parquet: not a readable Parquet file \(row group 0, column "id": its pages hold 3 of/,
    )
  })

  test.each<[string, (m: import('hyparquet').FileMetaData) => void, RegExp]>([
    ['file rows', (m) => void (m.num_rows = 7n), /the footer claims 7 rows but its row groups hold 3/],
    ['group rows', (m) => void (m.row_groups[0]!.num_rows = 1n << 40n), /holds 3 values for the 1099511627776 rows/],
    [
      'chunk size',
      (m) => void (m.row_groups[0]!.columns[0]!.meta_data!.total_compressed_size = 10n ** 12n),
      /row group 0, column "id" claims bytes 4-1000000000004, outside the data/,
    ],
    [
      'negative offset',
      (m) => void (m.row_groups[0]!.columns[0]!.meta_data!.data_page_offset = -5n),
      /page offset is -5/,
    ],
    ['schema', (m) => void (m.schema[0]!.num_children = 0), /the schema tree holds 1 of its 2 elements/],
  ])('a footer with a bad %s is CORRUPT_PARQUET naming the file, before any page is read', async (_, edit, why) => {
    const path = join(tempDir(), 'bad.parquet')
    writeFileSync(path, craftedParquet(edit))
    await expect(new ParquetReader({ path }).metadata()).rejects.toMatchObject({
      code: 'CORRUPT_PARQUET',
      message: expect.stringMatching(new RegExp(`bad\\.parquet: .*${why.source}`)),
    })
  })

  test('a footer length past the file, and page sizes past the chunk, are CORRUPT_PARQUET', async () => {
    const dir = tempDir()
    const good = craftedParquet(() => {})
    const long = Buffer.from(good)
    long.writeUInt32LE(good.length, good.length - 8)
    writeFileSync(join(dir, 'long.parquet'), long)
    await expect(readAll(join(dir, 'long.parquet'))).rejects.toMatchObject({
      code: 'CORRUPT_PARQUET',
      message: expect.stringMatching(/long\.parquet: .*the footer claims \d+ bytes of a \d+-byte file/),
    })
    // the chunk shrunk under its one page: the page's size runs past it
    const short = craftedParquet((m) => {
      const c = m.row_groups[0]!.columns[0]!.meta_data!
      c.total_compressed_size -= 4n
    })
    writeFileSync(join(dir, 'short.parquet'), short)
    await expect(readAll(join(dir, 'short.parquet'))).rejects.toMatchObject({
      code: 'CORRUPT_PARQUET',
      message: expect.stringMatching(
        /short\.parquet: .*row group 0, column "id", page 0 claims \d+ bytes, past the end/,
      ),
    })
    writeFileSync(join(dir, 'ok.parquet'), good)
    expect(await readAll(join(dir, 'ok.parquet'))).toEqual([{ id: 1 }, { id: 2 }, { id: 3 }])
  })

  test('a row group too large for the heap is refused before decoding, naming the file and group', () => {
    const group = { num_rows: 2n ** 31n, columns: [] } as unknown as import('hyparquet').RowGroup
    expect(() => checkGroupMemory(group, 4, 1, { uncompressed: 100, values: 2 ** 31 }, 'x.parquet')).toThrow(
      /x\.parquet: row group 4 holds 2147483648 rows of 1 columns, about \d+\.\d GiB decoded.*rowGroupSize/,
    )
    expect(() =>
      checkGroupMemory({ ...group, num_rows: 1000n }, 0, 3, { uncompressed: 1e5, values: 3000 }, 'x'),
    ).not.toThrow()
  })
})
