/**
 * @module zephyr benchmarks (`pnpm bench zephyr`).
 *
 * 1. JSONL → filter → map → Parquet on generated documents, with 1 and 2 fray
 *    worker processes (scaling ratio). The input is ZEPHYR_BENCH_MB of JSONL
 *    (default 128; set ZEPHYR_BENCH_MB=1024 for the full 1 GiB run).
 * 2. Reading a 1e6-row Parquet file through zephyr against hyparquet called
 *    directly (overhead ratio) and against parquetjs-lite (ratio).
 * Progress goes to stderr; stdout carries only the JSON lines.
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { LocalClient } from '@marin/fray'
import { emit, median, timeIt } from '@marin/rigging/bench'
import { parquetReadObjects } from 'hyparquet'
import { asyncBufferFromFile } from 'hyparquet/src/node.js'
import { compressors } from 'hyparquet-compressors'
import { ZephyrContext } from '../src/context.js'
import { Dataset } from '../src/dataset.js'
import { ParquetReader } from '../src/parquet-reader.js'

const say = (msg: string) => process.stderr.write(`[zephyr bench] ${msg}\n`)
const root = join(tmpdir(), `zephyr-bench-${process.pid}`)
mkdirSync(root, { recursive: true })
const MB = Number(process.env.ZEPHYR_BENCH_MB ?? 128)
const FILES = 8
const RUNS = Number(process.env.ZEPHYR_BENCH_RUNS ?? 3)

/** Deterministic pseudo-random words, so every run sees the same data. */
function* documents(bytes: number, seed: number): Generator<string> {
  const words = ['data', 'model', 'token', 'shard', 'river', 'city', 'garden', 'light', 'stone', 'music', 'paper', 'window', 'market', 'signal']
  const langs = ['en', 'en', 'en', 'fr', 'de']
  let x = seed >>> 0
  const rnd = () => ((x = (Math.imul(x, 1664525) + 1013904223) >>> 0) / 2 ** 32)
  let written = 0
  for (let id = 0; written < bytes; id++) {
    const n = 50 + Math.floor(rnd() * 250)
    const text = Array.from({ length: n }, () => words[Math.floor(rnd() * words.length)]).join(' ')
    const line = `${JSON.stringify({ id: `${seed}-${id}`, lang: langs[Math.floor(rnd() * langs.length)], url: `https://example.org/${seed}/${id}`, text })}\n`
    written += line.length
    yield line
  }
}

function generateJsonl(dir: string): void {
  mkdirSync(dir, { recursive: true })
  for (let f = 0; f < FILES; f++) {
    const lines: string[] = []
    for (const l of documents((MB * 2 ** 20) / FILES, f + 1)) lines.push(l)
    writeFileSync(join(dir, `docs-${f}.jsonl`), lines.join(''))
  }
}

/** User + system CPU seconds of these processes so far (Linux /proc). */
function workerCpuSeconds(pids: readonly (number | undefined)[]): number {
  let ticks = 0
  for (const pid of pids) {
    if (pid === undefined) continue
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    ticks += Number(fields[11]) + Number(fields[12]) // utime, stime
  }
  return ticks / 100 // USER_HZ
}

async function jsonlToParquet(): Promise<void> {
  const input = join(root, 'jsonl')
  say(`generating ${MB} MiB of JSONL in ${FILES} files`)
  generateJsonl(input)
  const pipeline = (out: string) =>
    Dataset.fromFiles(join(input, '*.jsonl'))
      .loadJsonl<{ id: string; lang: string; url: string; text: string }>()
      .filter((d) => d.lang === 'en' && d.text.length > 300)
      .map((d) => ({ id: d.id, url: d.url, text: d.text.toUpperCase(), words: d.text.split(' ').length }))
      .writeParquet(join(out, 'part-{shard:05d}-of-{total:05d}.parquet'))
  const client = new LocalClient()
  const seconds: Record<number, number> = {}
  const cpu: Record<number, number> = {}
  for (const workers of [1, 2]) {
    const ctx = new ZephyrContext({ client, maxWorkers: workers, progress: 'off', overwrite: true })
    const runner = await ctx.workers()! // start the worker processes before timing
    const out = join(root, `parquet-${workers}`)
    await ctx.execute(pipeline(out)) // warm up
    const cpu0 = workerCpuSeconds(runner.pids())
    seconds[workers] = await timeIt(() => ctx.execute(pipeline(out)), { runs: RUNS, warmup: 0 })
    cpu[workers] = (workerCpuSeconds(runner.pids()) - cpu0) / RUNS
    say(`${workers} worker(s): ${seconds[workers]!.toFixed(2)} s wall (median), ${cpu[workers]!.toFixed(2)} s worker CPU per run`)
    await ctx.close()
  }
  await client.shutdown()
  emit({ bench: 'zephyr', metric: 'jsonl_to_parquet_1_worker_mb_per_s', value: MB / seconds[1]!, unit: 'MB/s' })
  emit({ bench: 'zephyr', metric: 'jsonl_to_parquet_2_workers_mb_per_s', value: MB / seconds[2]!, unit: 'MB/s', baseline: MB / seconds[1]! })
  // CPU the workers spend per run: equal for 1 and 2 workers means splitting the work adds none,
  // so wall-clock scaling is bounded only by free cores (this machine is shared)
  emit({ bench: 'zephyr', metric: 'jsonl_to_parquet_2_workers_cpu_s', value: cpu[2]!, unit: 's', baseline: cpu[1]!, lowerIsBetter: true })
}

async function parquetRead(): Promise<void> {
  const ROWS = 1_000_000
  const file = join(root, 'rows.parquet')
  const require = createRequire(import.meta.url)
  // written by parquetjs-lite (plain snappy v1 pages), the one layout all three readers accept
  type LiteReader = { getCursor(): { next(): Promise<unknown> }; close(): Promise<void> }
  const parquetjs = require('parquetjs-lite') as {
    ParquetSchema: new (fields: Record<string, { type: string; compression?: string }>) => unknown
    ParquetWriter: { openFile(schema: unknown, path: string, opts: { rowGroupSize: number }): Promise<{ appendRow(r: object): Promise<void>; close(): Promise<void> }> }
    ParquetReader: { openFile(p: string): Promise<LiteReader> }
  }
  say(`writing ${ROWS} rows of Parquet with parquetjs-lite`)
  const schema = new parquetjs.ParquetSchema({
    id: { type: 'INT64', compression: 'SNAPPY' },
    lang: { type: 'UTF8', compression: 'SNAPPY' },
    score: { type: 'DOUBLE', compression: 'SNAPPY' },
    title: { type: 'UTF8', compression: 'SNAPPY' },
  })
  const writer = await parquetjs.ParquetWriter.openFile(schema, file, { rowGroupSize: 100_000 })
  const langs = ['en', 'fr', 'de', 'es']
  for (let i = 0; i < ROWS; i++) await writer.appendRow({ id: i, lang: langs[i % 4]!, score: (i % 1000) / 1000, title: `title ${i}` })
  await writer.close()

  const direct = async () => {
    const rs = await parquetReadObjects({ file: await asyncBufferFromFile(file), compressors })
    if (rs.length !== ROWS) throw new Error(`hyparquet read ${rs.length} rows`)
  }
  const reader = async () => {
    let n = 0
    for await (const batch of new ParquetReader({ path: file }).batches()) n += batch.length
    if (n !== ROWS) throw new Error(`ParquetReader read ${n} rows`)
  }
  const ctx = new ZephyrContext({ progress: 'off' })
  const pipeline = async () => {
    // a fused filter that keeps nothing: every row is read and tested, nothing is collected
    const r = await ctx.execute(Dataset.fromFiles(file).loadParquet<{ id: bigint }>().filter((x) => x.id < 0n))
    if (r.counters[0]!.recordsIn !== ROWS) throw new Error(`zephyr read ${r.counters[0]!.recordsIn} rows`)
  }
  const lite = async () => {
    const r = await parquetjs.ParquetReader.openFile(file)
    const cursor = r.getCursor()
    let n = 0
    while (await cursor.next()) n++
    await r.close()
    if (n !== ROWS) throw new Error(`parquetjs-lite read ${n} rows`)
  }
  // interleaved rounds, so that load from other processes on the machine hits all three alike
  const times = { direct: [] as number[], reader: [] as number[], pipeline: [] as number[] }
  for (const fn of [direct, reader, pipeline]) await fn() // warm up
  for (let i = 0; i < Math.max(RUNS, 5); i++) {
    times.direct.push(await timeIt(direct, { runs: 1, warmup: 0 }))
    times.reader.push(await timeIt(reader, { runs: 1, warmup: 0 }))
    times.pipeline.push(await timeIt(pipeline, { runs: 1, warmup: 0 }))
  }
  const tDirect = median(times.direct)
  const tReader = median(times.reader)
  const tPipeline = median(times.pipeline)
  say(`hyparquet direct ${tDirect.toFixed(2)} s, ParquetReader ${tReader.toFixed(2)} s, Dataset.loadParquet ${tPipeline.toFixed(2)} s (medians)`)
  // parquetjs-lite needs about two minutes for 1e6 rows here: one untimed-warmup-free run is enough
  const tLite = await timeIt(lite, { runs: 1, warmup: 0 })
  say(`parquetjs-lite: ${tLite.toFixed(2)} s`)
  const krows = ROWS / 1000
  emit({ bench: 'zephyr', metric: 'parquet_reader_krows_per_s_vs_hyparquet', value: krows / tReader, unit: 'krows/s', baseline: krows / tDirect })
  emit({ bench: 'zephyr', metric: 'parquet_pipeline_krows_per_s_vs_hyparquet', value: krows / tPipeline, unit: 'krows/s', baseline: krows / tDirect })
  emit({ bench: 'zephyr', metric: 'parquet_pipeline_krows_per_s_vs_parquetjs_lite', value: krows / tPipeline, unit: 'krows/s', baseline: krows / tLite })
}

try {
  if (process.env.ZEPHYR_BENCH_ONLY !== 'parquet') await jsonlToParquet()
  if (process.env.ZEPHYR_BENCH_ONLY !== 'jsonl') await parquetRead()
} finally {
  rmSync(root, { recursive: true, force: true })
}
