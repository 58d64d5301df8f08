import { createHash } from 'node:crypto'
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { LocalClient } from '@marin/fray'
import { afterAll, describe, expect, test } from 'vitest'
import { ZephyrContext } from './context.js'
import { Dataset } from './dataset.js'
import { col } from './expr.js'
import { tempDir } from './fixtures/tmp.js'
import type { tag } from './fixtures/user-fns.js'
import { fnRef } from './user-fn.js'

const client = new LocalClient()
afterAll(() => client.shutdown())

function inputs(files: number, perFile: number): string {
  const dir = tempDir()
  mkdirSync(join(dir, 'in'))
  for (let f = 0; f < files; f++) {
    const lines = Array.from({ length: perFile }, (_, i) => {
      const id = f * perFile + i
      return JSON.stringify({
        id,
        lang: ['en', 'fr', 'de'][id % 3],
        text: `document ${id} ${'lorem '.repeat(id % 11)}`,
      })
    })
    writeFileSync(join(dir, 'in', `${String(f).padStart(3, '0')}.jsonl`), lines.join('\n'))
  }
  return dir
}

function readAll(dir: string, sub: string): string[] {
  return readdirSync(join(dir, sub))
    .filter((f) => f.endsWith('.jsonl'))
    .sort()
    .map((f) => `${f}\n${readFileSync(join(dir, sub, f), 'utf8')}`)
}

describe('ZephyrContext on fray workers', () => {
  test('1 and 4 workers write identical outputs (map, filter, groupBy, deduplicate)', async () => {
    const dir = inputs(8, 150)
    const ds = (out: string) =>
      Dataset.fromFiles(join(dir, 'in/*.jsonl'))
        .loadJsonl<{ id: number; lang: string; text: string }>()
        .filter(col('lang').ne('de'))
        .map((r) => ({ ...r, words: r.text.split(' ').filter(Boolean).length }))
        .deduplicate((r) => r.words, { numShards: 3 })
        .groupBy('lang', (lang: string, rs: { id: number }[]) => ({ lang, n: rs.length, ids: rs.map((r) => r.id) }), {
          numShards: 2,
        })
        .writeJsonl(join(dir, out, 'part-{shard:05d}-of-{total:05d}.jsonl'))
    const one = new ZephyrContext({ client, maxWorkers: 1, progress: 'off' })
    const four = new ZephyrContext({ client, maxWorkers: 4, progress: 'off' })
    try {
      const a = await one.execute(ds('one'))
      const b = await four.execute(ds('four'))
      expect(readAll(dir, 'four')).toEqual(readAll(dir, 'one'))
      expect(a.counters.map((c) => [c.recordsIn, c.recordsOut])).toEqual(
        b.counters.map((c) => [c.recordsIn, c.recordsOut]),
      )
      expect(a.counters[0]!.recordsIn).toBe(1200)
      const workerPids = new Set((await four.workers()!).pids())
      expect(workerPids.size).toBe(4)
      expect(workerPids.has(process.pid)).toBe(false)
    } finally {
      await one.close()
      await four.close()
    }
  }, 120_000)

  test('a worker killed mid-shard: the shard is retried and each record is written once', async () => {
    const dir = inputs(6, 40)
    const marks = join(dir, 'marks')
    mkdirSync(marks)
    process.env.ZEPHYR_TEST_MARKS = marks
    const ctx = new ZephyrContext({ client, maxWorkers: 2, progress: 'off' })
    try {
      const runner = await ctx.workers()!
      const ds = Dataset.fromFiles(join(dir, 'in/*.jsonl'))
        .loadJsonl<{ id: number }>()
        .mapShard(async function* (rs, shard) {
          const fs = process.getBuiltinModule('node:fs') as typeof import('node:fs')
          fs.writeFileSync(`${process.env.ZEPHYR_TEST_MARKS}/${shard.shard}-${process.pid}-${Date.now()}`, '')
          for await (const r of rs) {
            await new Promise((res) => setTimeout(res, 10))
            yield r
          }
        })
        .writeJsonl(join(dir, 'out/part-{shard:05d}-of-{total:05d}.jsonl'))
      const run = ctx.execute(ds)
      // wait until some worker is inside a shard, then kill that worker's process
      let victim: number | undefined
      while (victim === undefined) {
        await new Promise((r) => setTimeout(r, 20))
        const pids = runner.pids()
        const mark = readdirSync(marks).find((m) => pids.includes(Number(m.split('-')[1])))
        if (mark) victim = Number(mark.split('-')[1])
      }
      process.kill(victim, 'SIGKILL')
      const r = await run
      expect(r.counters[0]!.retries).toBeGreaterThanOrEqual(1)
      const ids = readAll(dir, 'out')
        .flatMap((t) => t.split('\n').slice(1))
        .filter(Boolean)
        .map((l) => (JSON.parse(l) as { id: number }).id)
        .sort((a, b) => a - b)
      expect(ids).toEqual(Array.from({ length: 240 }, (_, i) => i))
      // the killed shard started twice, in two different processes
      const starts = readdirSync(marks).map((m) => m.split('-'))
      const byShard = new Map<string, Set<string>>()
      for (const [s, pid] of starts) byShard.set(s!, (byShard.get(s!) ?? new Set()).add(pid!))
      expect([...byShard.values()].some((pids) => pids.size >= 2 && pids.has(String(victim)))).toBe(true)
    } finally {
      delete process.env.ZEPHYR_TEST_MARKS
      await ctx.close()
    }
  }, 120_000)

  test('a function that captures a local variable is FUNCTION_NOT_PORTABLE on workers', async () => {
    const ctx = new ZephyrContext({ client, maxWorkers: 1, progress: 'off' })
    const factor = 3
    try {
      await expect(ctx.execute(Dataset.fromList([1, 2]).map((x) => x * factor))).rejects.toMatchObject({
        code: 'FUNCTION_NOT_PORTABLE',
        message: expect.stringMatching(/factor is not defined.*self-contained/),
      })
      // the same pipeline without the capture runs
      expect((await ctx.execute(Dataset.fromList([1, 2]).map((x) => x * 3))).results).toEqual([3, 6])
      // an in-memory iterable is written to scratch for the workers to read
      function* gen() {
        yield* [5, 6, 7]
      }
      expect((await ctx.execute(Dataset.fromIterable(gen()).map((x) => x + 1))).results).toEqual([6, 7, 8])
    } finally {
      await ctx.close()
    }
  }, 120_000)

  test("by default a context runs on worker processes of fray's " +
    'current client; args and module references reach them', async () => {
    const ctx = new ZephyrContext({ maxWorkers: 1, progress: 'off' })
    const fns = new URL('./fixtures/user-fns.ts', import.meta.url)
    try {
      const docs = [
        { id: 1, text: 'a' },
        { id: 2, text: 'bb' },
        { id: 3, text: 'ccc' },
      ]
      const { results } = await ctx.execute(
        Dataset.fromList(docs)
          .map(fnRef<typeof tag>(fns, 'tag'), { args: { salt: 'pepper' } })
          .filter((d, a) => d.id >= a.min, { args: { min: 2 } })
          .map((d) => ({ id: d.id, digest: d.digest, pid: process.pid })),
      )
      expect(results.map((r) => r.id)).toEqual([2, 3])
      expect(results[0]!.digest).toBe(createHash('sha256').update('pepperbb').digest('hex').slice(0, 8))
      expect(results[0]!.pid).not.toBe(process.pid)
      expect((await ctx.workers()!).pids()).toEqual([results[0]!.pid])
    } finally {
      await ctx.close()
    }
  }, 120_000)

  test(
    'a plan on memory:// storage runs in process even on a worker ' + 'context (that storage lives in one process)',
    async () => {
      const ctx = new ZephyrContext({ client, maxWorkers: 2, progress: 'off' })
      const offset = 10
      try {
        const r = await ctx.execute(
          Dataset.fromList([1, 2, 3], { numShards: 2 })
            .map((x) => x + offset)
            .writeJsonl('memory://zephyr-workers-test/out/p-{shard}.jsonl'),
        )
        expect(r.outputs).toHaveLength(2)
        expect(r.counters[0]!.recordsOut).toBe(3)
        expect(ctx.workers()).toBeDefined()
        expect((await ctx.workers()!).pids()).toEqual([]) // no worker was started
      } finally {
        await ctx.close()
      }
    },
  )

  test('workerResources reach fray: one-core workers run ' +
    'single-threaded GC, two-core ones do not; a bad field is named', async () => {
    const flags = (ctx: ZephyrContext) =>
      ctx.execute(Dataset.fromList([0]).map(() => process.execArgv.includes('--single-threaded-gc')))
    const small = new ZephyrContext({ client, maxWorkers: 1, progress: 'off' })
    const big = new ZephyrContext({ client, maxWorkers: 1, progress: 'off', workerResources: { cpu: 2 } })
    const bad = new ZephyrContext({ client, maxWorkers: 1, progress: 'off', workerResources: { cpu: -1 } })
    try {
      expect((await flags(small)).results).toEqual([true])
      expect((await flags(big)).results).toEqual([false])
      await expect(flags(bad)).rejects.toThrow(/resources\.cpu/)
    } finally {
      await Promise.all([small.close(), big.close(), bad.close()])
    }
  }, 120_000)
})
