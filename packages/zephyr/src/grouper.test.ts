import { describe, expect, test } from 'vitest'
import { ZephyrContext } from './context.js'
import { Dataset } from './dataset.js'
import { tempDir } from './fixtures/tmp.js'
import { Grouper } from './grouper.js'
import { canonicalKey, hashKeys } from './keys.js'

const docs = Array.from({ length: 20_000 }, (_, i) => ({ id: i, key: `k${(i * 7919) % 1500}`, body: 'x'.repeat(200) }))
const reduce = (key: string, items: { id: number }[]) => ({ key, n: items.length, ids: items.map((r) => r.id) })

describe('groupBy over more data than the memory budget', () => {
  test('spills to disk and gives exactly the in-memory result', async () => {
    // ~5 MB of records against a 256 KiB budget: at least ~20 spills
    const pipeline = Dataset.fromList(docs, { numShards: 3 }).groupBy('key', reduce, { numShards: 2 })
    const big = await new ZephyrContext({ inProcess: true, progress: 'off', memoryBudget: 1 << 30 }).execute(pipeline)
    const small = await new ZephyrContext({
      inProcess: true,
      progress: 'off',
      memoryBudget: 256 << 10,
      spillRoot: tempDir(),
    }).execute(pipeline)
    expect(big.counters[1]!.spilledBytes).toBe(0)
    expect(small.counters[1]!.spilledBytes).toBeGreaterThan(4_000_000)
    expect(small.results).toEqual(big.results)
    expect(small.results).toHaveLength(1500)
    const total = small.results.reduce((a, g) => a + g.n, 0)
    expect(total).toBe(docs.length)
    // items keep input order inside a group
    for (const g of small.results) expect(g.ids).toEqual([...g.ids].sort((a, b) => a - b))
  }, 90_000)

  test('deduplicate under a tiny budget keeps the first record of each key', async () => {
    const pipeline = Dataset.fromList(docs, { numShards: 2 }).deduplicate('key')
    const r = await new ZephyrContext({
      inProcess: true,
      progress: 'off',
      memoryBudget: 256 << 10,
      spillRoot: tempDir(),
    }).execute(pipeline)
    expect(r.results).toHaveLength(1500)
    const firstIds = new Map<string, number>()
    for (const d of docs) if (!firstIds.has(d.key)) firstIds.set(d.key, d.id)
    for (const x of r.results) expect(x.id).toBe(firstIds.get(x.key))
    expect(r.counters[1]!.spilledBytes).toBeGreaterThan(0)
  }, 90_000)

  test('one key larger than the budget is MEMORY_BUDGET_EXCEEDED', async () => {
    const g = new Grouper({ mode: 'group', budgetBytes: 10_000, spillDir: `${tempDir()}/spill` })
    const key = canonicalKey('same')
    const [h] = hashKeys([key])
    const add = async () => {
      for (let i = 0; i < 200; i++) await g.add(h!, key, 'same', { i, pad: 'y'.repeat(100) }, 120)
      for await (const _ of g.groups()) void _
    }
    await expect(add()).rejects.toMatchObject({
      code: 'MEMORY_BUDGET_EXCEEDED',
      message: expect.stringMatching(/raise memoryBudget/),
    })
    await g.close()
  }, 90_000)
})
