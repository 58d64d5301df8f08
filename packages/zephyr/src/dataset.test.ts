import { readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, test } from 'vitest'
import { ZephyrContext } from './context.js'
import { Dataset } from './dataset.js'
import { col } from './expr.js'
import { tempDir } from './fixtures/tmp.js'

const ctx = new ZephyrContext({ inProcess: true, progress: 'off', maxWorkers: 2 })
const nums = Array.from({ length: 100 }, (_, i) => i)

describe('Dataset is a lazy, immutable plan', () => {
  test('is not a thenable: async functions can return a Dataset', async () => {
    const ds = Dataset.fromList(nums).map((x: number) => x + 1)
    const make = async () => ds
    expect(await make()).toBe(ds)
  })

  test('methods return new datasets and run nothing', () => {
    let calls = 0
    const a = Dataset.fromList(nums)
    const b = a.map((x) => (calls++, x * 2))
    expect(a.ops).toHaveLength(0)
    expect(b.ops).toHaveLength(1)
    expect(calls).toBe(0)
    expect(
      b
        .filter((x) => x > 3)
        .writeJsonl('o/p-{shard}.jsonl')
        .describe(),
    ).toBe('fromList → map → filter → writeJsonl')
  })

  test('bad arguments are INVALID_PLAN errors that say what to pass', () => {
    expect(() => Dataset.fromList(nums).window(0)).toThrow(/window size must be a positive integer, got 0/)
    expect(() => Dataset.fromList(nums).reshard(1.5)).toThrow(/reshard numShards must be a positive integer/)
    expect(() => Dataset.fromList(nums).map(3 as never)).toThrow(/map needs a function/)
    expect(() => Dataset.fromList(nums).writeJsonl('out/all.jsonl')).toThrow(/no \{shard\} field/)
    expect(() => Dataset.fromList(nums).writeJsonl('out/p-{shard}-{part}.jsonl')).toThrow(/unknown field \{part\}/)
    expect(() =>
      Dataset.fromList(nums)
        .writeJsonl('o/p-{shard}.jsonl')
        .map((x) => x),
    ).toThrow(/a writer must be the last operation/)
    expect(() => Dataset.fromList(nums).loadJsonl({ onError: 'ignore' as never })).toThrow(
      /onError must be 'fail' or 'skip'/,
    )
  })

  test('bad run options are INVALID_PLAN errors naming the option', async () => {
    expect(() => new ZephyrContext({ memoryBudget: -1 })).toThrow(/ZephyrContext: invalid options \(memoryBudget: .*\)/)
    expect(() => new ZephyrContext({ maxWorkers: 2, workers: 3 } as never)).toThrow(/Unrecognized key.*"workers"/)
    expect(() => new ZephyrContext({ client: {} as never })).toThrow(/client: expected a fray client/)
    await expect(ctx.execute(Dataset.fromList(nums), { progress: 'loud' as never })).rejects.toMatchObject({
      code: 'INVALID_PLAN',
      message: expect.stringMatching(/progress/),
    })
  })
})

describe('transforms fuse into one pass per stage', () => {
  test('map, filter, flatMap, select, window, take in one stage', async () => {
    const ds = Dataset.fromList(
      nums.map((i) => ({ i, s: `n${i}`, drop: true })),
      { numShards: 4 },
    )
      .filter((r) => r.i % 2 === 0)
      .map((r) => ({ ...r, sq: r.i * r.i }))
      .flatMap((r) => [r, { ...r, i: -r.i }])
      .select('i', 'sq')
      .window(3)
      .take(4)
    const stages = await ctx.plan(ds)
    expect(stages).toHaveLength(1)
    const { results, counters } = await ctx.execute(ds)
    // shard 0 holds 0..24 → evens 0..24 → 26 records after flatMap → windows of 3, first 4 taken
    expect(results.slice(0, 2)).toEqual([
      [
        { i: 0, sq: 0 },
        { i: -0, sq: 0 },
        { i: 2, sq: 4 },
      ],
      [
        { i: -2, sq: 4 },
        { i: 4, sq: 16 },
        { i: -4, sq: 16 },
      ],
    ])
    expect(results).toHaveLength(16)
    expect(counters[0]).toMatchObject({ recordsIn: 100, recordsOut: 16, shards: 4 })
  })

  test('take stops reading its input early', async () => {
    let pulled = 0
    function* endless() {
      for (let i = 0; ; i++) {
        pulled++
        yield i
      }
    }
    const { results } = await new ZephyrContext({ inProcess: true, progress: 'off' }).execute(
      Dataset.fromIterable(endless())
        .map((x) => x * 10)
        .take(5),
    )
    expect(results).toEqual([0, 10, 20, 30, 40])
    expect(pulled).toBeLessThan(5000)
  })

  test('mapShard sees the whole shard and its index', async () => {
    const { results } = await ctx.execute(
      Dataset.fromList(nums, { numShards: 4 }).mapShard(async function* (rs, shard) {
        let sum = 0
        for await (const r of rs) sum += r
        yield { shard: shard.shard, total: shard.total, sum }
      }),
    )
    expect(results).toEqual(
      [0, 1, 2, 3].map((s) => ({
        shard: s,
        total: 4,
        sum: nums.slice(s * 25, s * 25 + 25).reduce((a, b) => a + b, 0),
      })),
    )
  })

  test('a throwing user function is USER_FUNCTION_FAILED naming stage and shard', async () => {
    const ds = Dataset.fromList(nums, { numShards: 2 }).map((x) => {
      if (x === 70) throw new Error('bad record 70')
      return x
    })
    await expect(ctx.execute(ds)).rejects.toMatchObject({
      code: 'USER_FUNCTION_FAILED',
      message: expect.stringMatching(/stage 0 shard 1: map threw: bad record 70/),
    })
  })

  test('expression filters work on any records', async () => {
    const rows = nums.map((i) => ({ i, lang: i % 3 ? 'en' : 'fr' }))
    const { results } = await ctx.execute(Dataset.fromList(rows).filter(col('lang').eq('fr').and(col('i').lt(10))))
    expect(results).toEqual([
      { i: 0, lang: 'fr' },
      { i: 3, lang: 'fr' },
      { i: 6, lang: 'fr' },
      { i: 9, lang: 'fr' },
    ])
  })
})

describe('stage boundaries', () => {
  test('reshard spreads records evenly and keeps each exactly once', async () => {
    const ds = Dataset.fromList(nums, { numShards: 2 })
      .reshard(5)
      .mapShard(function* (rs, s) {
        void rs
        yield s.shard
      })
    const stages = await ctx.plan(ds)
    expect(stages.map((s) => s.numShards)).toEqual([2, 5])
    const counted = await ctx.execute(
      Dataset.fromList(nums, { numShards: 2 })
        .reshard(5)
        .window(1000)
        .map((w) => w.length),
    )
    expect(counted.results).toEqual([20, 20, 20, 20, 20])
    const all = await ctx.execute(Dataset.fromList(nums, { numShards: 3 }).reshard(4))
    expect([...all.results].sort((a, b) => a - b)).toEqual(nums)
  })

  test('groupBy reduces each key once, whatever the shard counts', async () => {
    const rows = nums.map((i) => ({ i, k: `k${i % 7}` }))
    const reduce = (k: string, items: { i: number }[]) => ({
      k,
      n: items.length,
      sum: items.reduce((a, r) => a + r.i, 0),
    })
    const a = await ctx.execute(Dataset.fromList(rows, { numShards: 3 }).groupBy('k', reduce, { numShards: 2 }))
    const b = await ctx.execute(Dataset.fromList(rows, { numShards: 1 }).groupBy((r) => r.k, reduce, { numShards: 5 }))
    const byKey = (xs: { k: string }[]) => [...xs].sort((x, y) => x.k.localeCompare(y.k))
    expect(byKey(a.results)).toEqual(byKey(b.results))
    expect(a.results).toHaveLength(7)
    expect(a.results.find((r) => r.k === 'k0')).toEqual({
      k: 'k0',
      n: 15,
      sum: nums.filter((i) => i % 7 === 0).reduce((x, y) => x + y, 0),
    })
    expect(a.counters.map((c) => [c.recordsIn, c.recordsOut])).toEqual([
      [100, 100],
      [100, 7],
    ])
  })

  test('deduplicate keeps the first record of each key in input order', async () => {
    const rows = [...nums, ...nums].map((i, j) => ({ text: `t${i % 30}`, j }))
    const { results } = await ctx.execute(
      Dataset.fromList(rows, { numShards: 4 }).deduplicate('text', { numShards: 3 }),
    )
    expect(results).toHaveLength(30)
    for (const r of results) expect(r.j).toBe(Number(r.text.slice(1)))
  })
})

describe('outputs', () => {
  test('existing outputs are refused, replaced with overwrite, kept with skipExisting', async () => {
    const dir = tempDir()
    const ds = Dataset.fromList(nums, { numShards: 4 })
      .map((x) => ({ x }))
      .writeJsonl(join(dir, 'part-{shard:05d}-of-{total:05d}.jsonl'))
    await ctx.execute(ds)
    expect(readdirSync(dir).sort()).toEqual([0, 1, 2, 3].map((i) => `part-0000${i}-of-00004.jsonl`))
    await expect(ctx.execute(ds)).rejects.toMatchObject({
      code: 'OUTPUT_EXISTS',
      message: expect.stringMatching(/part-00000-of-00004\.jsonl already exists \(4 of 4 outputs\); pass skipExisting/),
    })
    writeFileSync(join(dir, 'part-00002-of-00004.jsonl'), 'stale\n')
    const kept = await ctx.execute(ds, { skipExisting: true })
    expect(kept.counters[0]!.shardsSkipped).toBe(4)
    expect(readFileSync(join(dir, 'part-00002-of-00004.jsonl'), 'utf8')).toBe('stale\n')
    const replaced = await ctx.execute(ds, { overwrite: true })
    expect(replaced.counters[0]!.recordsOut).toBe(100)
    expect(readFileSync(join(dir, 'part-00002-of-00004.jsonl'), 'utf8').split('\n')[0]).toBe('{"x":50}')
  })

  test('pipelines read from and write to a memory:// bucket', async () => {
    await ctx.execute(
      Dataset.fromList(nums, { numShards: 2 })
        .map((i) => ({ i }))
        .writeJsonl('memory://zephyr-bucket/raw/part-{shard:05d}.jsonl.gz'),
    )
    const r = await ctx.execute(
      Dataset.fromFiles('memory://zephyr-bucket/raw/*.jsonl.gz')
        .loadJsonl<{ i: number }>()
        .filter((x) => x.i >= 95)
        .writeParquet('memory://zephyr-bucket/clean/part-{shard:05d}-of-{total:05d}.parquet'),
    )
    expect(r.outputs).toEqual([
      'memory://zephyr-bucket/clean/part-00000-of-00002.parquet',
      'memory://zephyr-bucket/clean/part-00001-of-00002.parquet',
    ])
    const back = await ctx.execute(Dataset.fromFiles('memory://zephyr-bucket/clean/*.parquet').loadParquet())
    expect(back.results).toEqual([95, 96, 97, 98, 99].map((i) => ({ i })))
  })

  test('the local cache downloads a bucket object once and again only after it changes', async () => {
    const cacheDir = tempDir()
    const cached = new ZephyrContext({ inProcess: true, progress: 'off', cacheDir })
    await ctx.execute(
      Dataset.fromList(nums)
        .map((i) => ({ i, lang: i % 2 ? 'en' : 'fr' }))
        .writeParquet('memory://zephyr-cache/in/part-{shard}.parquet'),
    )
    await ctx.execute(
      Dataset.fromList(nums)
        .map((i) => ({ i }))
        .writeJsonl('memory://zephyr-cache/in/part-{shard}.jsonl.gz'),
    )
    const pq = Dataset.fromFiles('memory://zephyr-cache/in/*.parquet').loadParquet({ columns: ['i'] })
    const js = Dataset.fromFiles('memory://zephyr-cache/in/*.jsonl.gz').loadJsonl()
    const first = await cached.execute(pq)
    const again = await cached.execute(pq)
    expect(first.counters[0]!.bytesRead).toBeGreaterThan(0)
    expect(again.counters[0]!.bytesRead).toBe(0)
    expect(again.results).toEqual(first.results)
    expect((await cached.execute(js)).counters[0]!.bytesRead).toBeGreaterThan(0)
    expect((await cached.execute(js)).results).toEqual(nums.map((i) => ({ i })))
    expect((await cached.execute(js)).counters[0]!.bytesRead).toBe(0)
    // a rewritten object has a new generation: fetched again, never read stale
    await ctx.execute(
      Dataset.fromList([7])
        .map((i) => ({ i }))
        .writeJsonl('memory://zephyr-cache/in/part-{shard}.jsonl.gz'),
      { overwrite: true },
    )
    const fresh = await cached.execute(js)
    expect(fresh.results).toEqual([{ i: 7 }])
    expect(fresh.counters[0]!.bytesRead).toBeGreaterThan(0)
    expect(readdirSync(cacheDir, { recursive: true }).filter((f) => String(f).endsWith('.jsonl.gz'))).toHaveLength(2)
  })

  test('a given scratch folder: the run uses and removes only its own subfolder', async () => {
    const scratch = tempDir()
    writeFileSync(join(scratch, 'keep.txt'), 'mine')
    const seen: string[] = []
    const r = await ctx.execute(
      Dataset.fromList(nums, { numShards: 2 })
        .reshard(3)
        .mapShard(async function* (rs) {
          seen.push(...readdirSync(scratch))
          for await (const x of rs) yield x
        }),
      { scratch },
    )
    expect(r.results).toHaveLength(100)
    expect(seen.filter((n) => /^zephyr-[0-9a-f]{16}$/.test(n)).length).toBeGreaterThan(0)
    expect(readdirSync(scratch)).toEqual(['keep.txt'])
  })

  test('a glob that matches nothing is INPUT_NOT_FOUND', async () => {
    const dir = tempDir()
    await expect(ctx.execute(Dataset.fromFiles(join(dir, '*.jsonl')).loadJsonl())).rejects.toMatchObject({
      code: 'INPUT_NOT_FOUND',
      message: expect.stringMatching(/no files match .*\*\.jsonl/),
    })
  })
})
