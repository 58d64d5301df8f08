import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { tableFromArrays, tableToIPC } from 'apache-arrow'
import { expect, test } from 'vitest'
import { ZephyrContext } from '../context.js'
import { Dataset } from '../dataset.js'
import { tempDir } from '../fixtures/tmp.js'

const ctx = new ZephyrContext({ inProcess: true, progress: 'off' })

test('Arrow IPC round trip keeps types, nulls and nested values', async () => {
  const dir = tempDir()
  const docs = Array.from({ length: 3000 }, (_, i) => ({
    id: i,
    big: BigInt(i) << 40n,
    ok: i % 3 === 0,
    text: i % 4 ? `row ${i}` : null,
    meta: i % 2 ? { k: [i] } : null,
    at: new Date(1_700_000_000_000 + i),
  }))
  const w = await ctx.execute(
    Dataset.fromList(docs, { numShards: 2 }).writeArrow(join(dir, 'part-{shard:05d}-of-{total:05d}.arrow')),
  )
  expect(w.outputs).toHaveLength(2)
  const back = await ctx.execute(Dataset.fromFiles(join(dir, '*.arrow')).loadArrow())
  expect(back.results).toEqual(docs)
  const some = await ctx.execute(
    Dataset.fromFiles(join(dir, '*.arrow'))
      .loadArrow({ columns: ['id', 'ok'] })
      .take(2),
  )
  expect(some.results).toEqual([
    { id: 0, ok: true },
    { id: 1, ok: false },
    { id: 1500, ok: true },
    { id: 1501, ok: false },
  ])
})

test('reads Arrow IPC stream and file formats written by apache-arrow', async () => {
  const dir = tempDir()
  const table = tableFromArrays({ x: Float64Array.from([1, 2, 3]), s: ['a', 'b', 'c'] })
  writeFileSync(join(dir, 'a.arrows'), tableToIPC(table, 'stream'))
  writeFileSync(join(dir, 'b.arrow'), tableToIPC(table, 'file'))
  const r = await ctx.execute(Dataset.fromFiles(join(dir, '*.arrow*')).loadArrow())
  expect(r.results).toEqual(
    [...Array(2)].flatMap(() => [
      { x: 1, s: 'a' },
      { x: 2, s: 'b' },
      { x: 3, s: 'c' },
    ]),
  )
})

test('a truncated Arrow file is a CORRUPT_ARROW error naming the file', async () => {
  const dir = tempDir()
  const bytes = tableToIPC(tableFromArrays({ x: Float64Array.from({ length: 1000 }, (_, i) => i) }), 'stream')
  writeFileSync(join(dir, 'cut.arrows'), bytes.subarray(0, bytes.length - 500))
  await expect(ctx.execute(Dataset.fromFiles(join(dir, 'cut.arrows')).loadArrow())).rejects.toMatchObject({
    code: 'CORRUPT_ARROW',
    message: expect.stringContaining('cut.arrows'),
  })
})
