/**
 * @module The zephyr-reader guide (docs/guides/zephyr-reader.md): a reader for a format zephyr does not know
 * (tab-separated `id genre text` files, read by tsv-reader.ts) used in a plan, as an executor step.
 */
import { mkdir, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { readBrown } from '@marin/datakit'
import { Experiment, ingestStep, runIfMain, step, versioned } from '@marin/marin'
import { Dataset, ZephyrContext, fnRef } from '@marin/zephyr'
import { escapeField, type readTsv } from './tsv-reader.js'

const tiny = process.env.GUIDE_SCALE === 'tiny'

// Some input in that format: Brown documents, three to a file.
export const tsv = step({
  name: 'guide-tsv',
  config: { documents: versioned(tiny ? 6 : 100) },
  fn: async (c, { outputPath }) => {
    await mkdir(outputPath, { recursive: true })
    const lines = readBrown({ part: 'train', files: c.documents }).map((d) =>
      [d.id, d.genre, d.text].map(escapeField).join('\t'),
    )
    for (let i = 0; i < lines.length; i += 3)
      await writeFile(join(outputPath, `part-${i / 3}.tsv`), `${lines.slice(i, i + 3).join('\n')}\n`)
  },
})

// The plan: the reader by module reference (a worker process imports tsv-reader.ts and calls `readTsv`).
export const jsonl = step({
  name: 'guide-tsv-jsonl',
  config: { input: tsv.output() },
  fn: async (c, { outputPath, log }) => {
    const plan = Dataset.fromFiles(`${c.input}/*.tsv`)
      .mapShard(fnRef<typeof readTsv>(new URL('./tsv-reader.ts', import.meta.url).href, 'readTsv'))
      .filter((r) => r.text.trim().length > 0)
      .writeJsonl(join(outputPath, 'part-{shard:05d}-of-{total:05d}.jsonl'))
    const ctx = new ZephyrContext({ inProcess: tiny, maxWorkers: 2 })
    try {
      const { outputs, counters } = await ctx.execute(plan)
      log.info({ files: outputs.length, records: counters.at(-1)?.recordsOut }, 'converted')
    } finally {
      await ctx.close()
    }
  },
})

// Its output is ordinary JSONL, so the rest of Marin takes it from here.
export const dataset = ingestStep({ name: 'guide-records', source: jsonl.output('*.jsonl'), format: 'jsonl' })

const experiment = new Experiment({ name: 'zephyr-reader', steps: [dataset] })
export default experiment
await runIfMain(import.meta.url, experiment)
