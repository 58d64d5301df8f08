/**
 * Out-of-core dedup (signatures per shard, shuffled by bucket on zephyr worker processes,
 * clusters merged by the coordinator) finds what the in-memory path finds: the same report
 * and the same kept documents, on Brown paragraphs with planted exact and near copies.
 */
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ZephyrContext } from '@marin/zephyr'
import { afterAll, describe, expect, test } from 'vitest'
import { Dataset } from '../dataset/from-datakit.js'
import { ingest } from '../dataset/ingest.js'
import { workDir } from '../store.js'
import { brownParagraphs } from '../test-support/brown.js'
import { dedup } from './dedup.js'

const root = mkdtempSync(join(tmpdir(), 'datakit-ooc-'))
const prefix = join(root, 'marin')
const workers = new ZephyrContext({ maxWorkers: 2, progress: 'off' })
const inProcess = new ZephyrContext({ inProcess: true, progress: 'off' })
afterAll(async () => {
  await workers.close()
  await inProcess.close()
  rmSync(root, { recursive: true, force: true })
})

// Unique Brown paragraphs, then planted copies spread over three shards: exact copies (one
// of them twice), near copies (one word changed), and a copy of a near copy.
const originals = [...new Set(brownParagraphs(6))].filter((p) => p.split(' ').length >= 12)
const long = originals.filter((p) => p.split(' ').length >= 40)
const exact = long.slice(0, 5).map((p) => `  ${p.toUpperCase()}  `)
const near = long.slice(5, 10).map((p) => {
  const w = p.split(' ')
  w[Math.floor(w.length / 2)] = 'zebra'
  return w.join(' ')
})
const shards = [
  [...originals.slice(0, 150), exact[0]!, near[0]!],
  [...originals.slice(150, 300), exact[1]!, exact[0]!, near[1]!, near[2]!, near[0]!.toLowerCase()],
  [...originals.slice(300), exact[2]!, exact[3]!, exact[4]!, near[3]!, near[4]!],
]

async function texts(name: string): Promise<string[]> {
  return (await inProcess.execute(Dataset.fromDatakit(name, { prefix }))).results.map((r) => r.text)
}

describe('out-of-core dedup', () => {
  mkdirSync(join(root, 'src'), { recursive: true })
  shards.forEach((docs, i) =>
    writeFileSync(join(root, 'src', `part-${i}.jsonl`), `${docs.map((text) => JSON.stringify({ text })).join('\n')}\n`),
  )

  test('finds the same duplicates and keeps the same documents as the in-memory path', async () => {
    await ingest({ name: 'planted', source: join(root, 'src', 'part-*.jsonl'), format: 'jsonl', prefix })
    const mem = await dedup('planted', { prefix, context: inProcess, outOfCore: false, output: 'planted-mem' })
    const ooc = await dedup('planted', {
      prefix,
      context: workers,
      outOfCore: { buckets: 4 },
      output: 'planted-ooc',
    })
    expect(mem.report).toMatchObject({ exactDuplicates: 7, fuzzyDuplicates: 5, kept: originals.length })
    expect(mem.outOfCore).toBeUndefined()
    expect(ooc.outOfCore).toMatchObject({ buckets: 4, shards: 3 })
    expect(ooc.report).toEqual(mem.report)
    const kept = await texts('planted-ooc')
    expect(kept).toEqual(await texts('planted-mem'))
    expect(kept).toEqual(originals)
    // its scratch files are gone
    expect(readdirSync(workDir({ prefix }, 'dedup', 'planted-ooc'))).toEqual([])
  }, 120_000)

  test('exact only and fuzzy only agree too', async () => {
    for (const level of [{ fuzzy: false }, { exact: false }]) {
      const mem = await dedup('planted', { prefix, context: inProcess, outOfCore: false, output: 'm', ...level })
      const ooc = await dedup('planted', { prefix, context: workers, outOfCore: { buckets: 3 }, output: 'o', ...level })
      expect(ooc.outOfCore?.buckets).toBe(3)
      expect(ooc.report).toEqual(mem.report)
      expect(await texts('o')).toEqual(await texts('m'))
    }
  }, 120_000)

  test('paragraph and line levels are refused out of core, naming the options', async () => {
    await expect(
      dedup('planted', { prefix, context: inProcess, outOfCore: true, paragraphs: true, output: 'x' }),
    ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringMatching(/paragraphs.*outOfCore/) })
  })
})
