/**
 * @module zephyr benchmarks (`pnpm bench zephyr`).
 *
 * 1. JSONL → filter → map → Parquet on generated documents, with 1 and 2 fray
 *    worker processes (scaling ratio; also against one worker holding two cores, which keeps
 *    V8's GC helper threads), next to a control: the same kind of CPU
 *    work in 1 and 2 plain node processes, which says what a second process can
 *    gain on the machine at that moment. The input is ZEPHYR_BENCH_MB of JSONL
 *    (default 1024, the full 1 GiB; smaller for a quick look).
 * 2. Reading a 1e6-row Parquet file through zephyr against hyparquet called
 *    directly (overhead ratio) and against parquetjs-lite (ratio).
 * Progress goes to stderr; stdout carries only the JSON lines. ZEPHYR_BENCH_ONLY=jsonl|parquet
 * runs one part; ZEPHYR_BENCH_LITE=0 skips the minutes-long parquetjs-lite read.
 */
import { spawn } from 'node:child_process'
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
const MB = Number(process.env.ZEPHYR_BENCH_MB ?? 1024)
const FILES = 8
const RUNS = Number(process.env.ZEPHYR_BENCH_RUNS ?? 3)

/** Deterministic pseudo-random words, so every run sees the same data. */
function* documents(bytes: number, seed: number): Generator<string> {
  const words = [
    'data',
    'model',
    'token',
    'shard',
    'river',
    'city',
    'garden',
    'light',
    'stone',
    'music',
    'paper',
    'window',
    'market',
    'signal',
  ]
  const langs = ['en', 'en', 'en', 'fr', 'de']
  let x = seed >>> 0
  const rnd = () => (x = (Math.imul(x, 1664525) + 1013904223) >>> 0) / 2 ** 32
  let written = 0
  for (let id = 0; written < bytes; id++) {
    const n = 50 + Math.floor(rnd() * 250)
    const text = Array.from({ length: n }, () => words[Math.floor(rnd() * words.length)]).join(' ')
    const lang = langs[Math.floor(rnd() * langs.length)]
    const line = `${JSON.stringify({ id: `${seed}-${id}`, lang, url: `https://example.org/${seed}/${id}`, text })}\n`
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

/** User + system CPU seconds of one process so far, or of its main thread only (Linux /proc). */
function cpuSeconds(pid: number | undefined, mainThread = false): number {
  if (pid === undefined) return 0
  const stat = readFileSync(mainThread ? `/proc/${pid}/task/${pid}/stat` : `/proc/${pid}/stat`, 'utf8')
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return (Number(fields[11]) + Number(fields[12])) / 100 // utime, stime in USER_HZ
}

const load = () => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')

// The control: the same kind of CPU work (JSON parse, string transforms) in plain node
// processes, so `2 processes ÷ 1` says how much a second process can gain on this machine
// right now. Zephyr's scaling is judged against it, measured in the same interleaved rounds.
const CONTROL = `
const text = 'river city garden light stone '.repeat(40)
const docs = Array.from({ length: 2000 }, (_, i) => JSON.stringify({ id: i, text }))
let n = 0
for (let u = 0; u < Number(process.argv[1]); u++) {
  for (const d of docs) { const r = JSON.parse(d); n += r.text.toUpperCase().split(' ').length }
}
const c = process.cpuUsage()
console.log(n > 0 ? (c.user + c.system) / 1e6 : -1)
`
/** Runs `units` of control work split over `processes`; wall seconds and the CPU seconds they used. */
async function control(processes: number, units: number): Promise<{ wall: number; cpu: number }> {
  const t0 = performance.now()
  const cpus = await Promise.all(
    Array.from(
      { length: processes },
      () =>
        new Promise<number>((resolve, reject) => {
          const child = spawn(process.execPath, ['-e', CONTROL, String(Math.round(units / processes))], {
            stdio: ['ignore', 'pipe', 'inherit'],
          })
          let out = ''
          child.stdout.on('data', (d) => (out += d))
          child.on('exit', (code) =>
            code === 0 ? resolve(Number(out)) : reject(new Error(`control process exited with ${code}`)),
          )
        }),
    ),
  )
  return { wall: (performance.now() - t0) / 1000, cpu: cpus.reduce((a, b) => a + b, 0) }
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
  const configs = [1, 2].map((workers) => ({
    workers,
    ctx: new ZephyrContext({ client, maxWorkers: workers, progress: 'off', overwrite: true }),
    out: join(root, `parquet-${workers}`),
  }))
  // one worker that holds two cores keeps V8's parallel GC helper threads: the fastest single worker
  const helped = {
    ctx: new ZephyrContext({ client, maxWorkers: 1, progress: 'off', overwrite: true, workerResources: { cpu: 2 } }),
    out: join(root, 'parquet-1-gc-helpers'),
  }
  for (const c of [...configs, helped]) await c.ctx.execute(pipeline(c.out)) // start the workers and warm up
  const runners = await Promise.all(configs.map((c) => c.ctx.workers()!))
  // control work sized like one run of the pipeline on one worker (in CPU seconds)
  const probe = runners[0]!.pids()
  const p0 = cpuSeconds(probe[0])
  await configs[0]!.ctx.execute(pipeline(configs[0]!.out))
  const pipelineCpu = cpuSeconds(probe[0]) - p0
  const calib = await control(1, 4)
  const units = 2 * Math.max(1, Math.round(pipelineCpu / (calib.cpu / 4) / 2))
  say(`one pipeline run: ${pipelineCpu.toFixed(2)} CPU s; control: ${units} units`)
  const wall: Record<string, number[]> = { z1: [], z2: [], z1gc: [], c1: [], c2: [] }
  const cpu: Record<string, number[]> = {
    z1: [],
    z2: [],
    main1: [],
    main2: [],
    coordinator1: [],
    coordinator2: [],
    w0: [],
    w1: [],
  }
  const loads: string[] = []
  for (let round = 0; round < RUNS; round++) {
    loads.push(load())
    for (const [i, c] of configs.entries()) {
      const pids = runners[i]!.pids()
      const before = pids.map((p) => cpuSeconds(p))
      const mainBefore = pids.map((p) => cpuSeconds(p, true))
      const main0 = process.cpuUsage()
      const t0 = performance.now()
      await c.ctx.execute(pipeline(c.out))
      wall[`z${c.workers}`]!.push((performance.now() - t0) / 1000)
      const main = process.cpuUsage(main0)
      const used = pids.map((p, k) => cpuSeconds(p) - before[k]!)
      cpu[`z${c.workers}`]!.push(used.reduce((a, b) => a + b, 0))
      cpu[`main${c.workers}`]!.push(pids.reduce<number>((a, p, k) => a + cpuSeconds(p, true) - mainBefore[k]!, 0))
      cpu[`coordinator${c.workers}`]!.push((main.user + main.system) / 1e6)
      if (c.workers === 2) used.forEach((u, k) => cpu[`w${k}`]!.push(u))
    }
    const tHelped = performance.now()
    await helped.ctx.execute(pipeline(helped.out))
    wall.z1gc!.push((performance.now() - tHelped) / 1000)
    wall.c1!.push((await control(1, units)).wall)
    wall.c2!.push((await control(2, units)).wall)
    say(
      `round ${round + 1}: load ${loads[round]}; zephyr 1 worker ` +
        `${wall.z1!.at(-1)!.toFixed(2)} s (with GC helper threads ` +
        `${wall.z1gc!.at(-1)!.toFixed(2)} s), 2 workers ` +
        `${wall.z2!.at(-1)!.toFixed(2)} s; control 1 process ` +
        `${wall.c1!.at(-1)!.toFixed(2)} s, 2 processes ` +
        `${wall.c2!.at(-1)!.toFixed(2)} s`,
    )
  }
  for (const c of [...configs, helped]) await c.ctx.close()
  await client.shutdown()
  const m = (k: string, o: Record<string, number[]>) => median(o[k]!)
  say(
    `CPU seconds per run (medians): 1 worker ` +
      `${m('z1', cpu).toFixed(2)} (its main thread ` +
      `${m('main1', cpu).toFixed(2)}, the rest GC and I/O threads; ` +
      `coordinator ${m('coordinator1', cpu).toFixed(2)}); 2 workers ` +
      `${m('z2', cpu).toFixed(2)} = ${m('w0', cpu).toFixed(2)} + ` +
      `${m('w1', cpu).toFixed(2)} (main threads ` +
      `${m('main2', cpu).toFixed(2)}; coordinator ` +
      `${m('coordinator2', cpu).toFixed(2)})`,
  )
  // per-round ratios: each round's zephyr pair and control pair ran back to back under the same load
  const scaling = median(wall.z1!.map((t, i) => t / wall.z2![i]!))
  const ceiling = median(wall.c1!.map((t, i) => t / wall.c2![i]!))
  say(
    `scaling per round: zephyr ` +
      `${wall.z1!.map((t, i) => (t / wall.z2![i]!).toFixed(2)).join(', ')}` +
      `; control ` +
      `${wall.c1!.map((t, i) => (t / wall.c2![i]!).toFixed(2)).join(', ')}`,
  )
  emit({ bench: 'zephyr', metric: 'jsonl_to_parquet_1_worker_mb_per_s', value: MB / m('z1', wall), unit: 'MB/s' })
  emit({
    bench: 'zephyr',
    metric: 'jsonl_to_parquet_2_workers_mb_per_s',
    value: MB / m('z2', wall),
    unit: 'MB/s',
    baseline: MB / m('z1', wall),
  })
  emit({ bench: 'zephyr', metric: 'jsonl_to_parquet_2_workers_speedup', value: scaling, unit: 'x', baseline: 1 })
  // against the fastest single worker (one holding two cores, so V8's GC helper threads run beside it)
  emit({
    bench: 'zephyr',
    metric: 'jsonl_to_parquet_2_workers_speedup_vs_1_worker_with_gc_helpers',
    value: median(wall.z1gc!.map((t, i) => t / wall.z2![i]!)),
    unit: 'x',
    baseline: 1,
  })
  // what a second plain node process gains on this machine in the same rounds: the ceiling for any scaling
  emit({ bench: 'zephyr', metric: 'control_2_processes_speedup', value: ceiling, unit: 'x', baseline: 1 })
  emit({ bench: 'zephyr', metric: 'jsonl_to_parquet_scaling_vs_control', value: scaling, unit: 'x', baseline: ceiling })
  // CPU the workers spend per run: equal for 1 and 2 workers means splitting the work adds none
  emit({
    bench: 'zephyr',
    metric: 'jsonl_to_parquet_2_workers_cpu_s',
    value: m('z2', cpu),
    unit: 's',
    baseline: m('z1', cpu),
    lowerIsBetter: true,
  })
  // the busier worker's share of the work: 0.5 is a perfect split
  emit({
    bench: 'zephyr',
    metric: 'jsonl_to_parquet_busiest_worker_share',
    value: Math.max(m('w0', cpu), m('w1', cpu)) / (m('w0', cpu) + m('w1', cpu)),
    unit: 'fraction',
  })
  emit({ bench: 'zephyr', metric: 'jsonl_to_parquet_coordinator_cpu_s', value: m('coordinator2', cpu), unit: 's' })
}

async function parquetRead(): Promise<void> {
  const ROWS = 1_000_000
  const file = join(root, 'rows.parquet')
  const require = createRequire(import.meta.url)
  // written by parquetjs-lite (plain snappy v1 pages), the one layout all three readers accept
  type LiteReader = { getCursor(): { next(): Promise<unknown> }; close(): Promise<void> }
  const parquetjs = require('parquetjs-lite') as {
    ParquetSchema: new (fields: Record<string, { type: string; compression?: string }>) => unknown
    ParquetWriter: {
      openFile(
        schema: unknown,
        path: string,
        opts: { rowGroupSize: number },
      ): Promise<{ appendRow(r: object): Promise<void>; close(): Promise<void> }>
    }
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
  for (let i = 0; i < ROWS; i++)
    await writer.appendRow({ id: i, lang: langs[i % 4]!, score: (i % 1000) / 1000, title: `title ${i}` })
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
  const inProcess = new ZephyrContext({ inProcess: true, progress: 'off' })
  const onWorker = new ZephyrContext({ maxWorkers: 1, progress: 'off' }) // the default: a worker process
  // a fused filter that keeps nothing: every row is read and tested, nothing is collected
  const readAll = async (ctx: ZephyrContext) => {
    const r = await ctx.execute(
      Dataset.fromFiles(file)
        .loadParquet<{ id: bigint }>()
        .filter((x) => x.id < 0n),
    )
    if (r.counters[0]!.recordsIn !== ROWS) throw new Error(`zephyr read ${r.counters[0]!.recordsIn} rows`)
  }
  const pipeline = () => readAll(inProcess)
  const worker = () => readAll(onWorker)
  const lite = async () => {
    const r = await parquetjs.ParquetReader.openFile(file)
    const cursor = r.getCursor()
    let n = 0
    while (await cursor.next()) n++
    await r.close()
    if (n !== ROWS) throw new Error(`parquetjs-lite read ${n} rows`)
  }
  // interleaved rounds, so that load from other processes on the machine hits all three alike
  const times = { direct: [] as number[], reader: [] as number[], pipeline: [] as number[], worker: [] as number[] }
  for (const fn of [direct, reader, pipeline, worker]) await fn() // warm up (and start the worker)
  for (let i = 0; i < Math.max(RUNS, 5); i++) {
    times.direct.push(await timeIt(direct, { runs: 1, warmup: 0 }))
    times.reader.push(await timeIt(reader, { runs: 1, warmup: 0 }))
    times.pipeline.push(await timeIt(pipeline, { runs: 1, warmup: 0 }))
    times.worker.push(await timeIt(worker, { runs: 1, warmup: 0 }))
  }
  await onWorker.close()
  const tDirect = median(times.direct)
  const tReader = median(times.reader)
  const tPipeline = median(times.pipeline)
  const tWorker = median(times.worker)
  say(
    `load ${load()}; hyparquet direct ${tDirect.toFixed(2)} s, ` +
      `ParquetReader ${tReader.toFixed(2)} s, Dataset.loadParquet in ` +
      `process ${tPipeline.toFixed(2)} s, on a worker ` +
      `${tWorker.toFixed(2)} s (medians)`,
  )
  // parquetjs-lite needs minutes for 1e6 rows here: one run is enough (ZEPHYR_BENCH_LITE=0 skips it)
  const tLite = process.env.ZEPHYR_BENCH_LITE === '0' ? undefined : await timeIt(lite, { runs: 1, warmup: 0 })
  if (tLite !== undefined) say(`parquetjs-lite: ${tLite.toFixed(2)} s`)
  const krows = ROWS / 1000
  emit({
    bench: 'zephyr',
    metric: 'parquet_reader_krows_per_s_vs_hyparquet',
    value: krows / tReader,
    unit: 'krows/s',
    baseline: krows / tDirect,
  })
  emit({
    bench: 'zephyr',
    metric: 'parquet_pipeline_krows_per_s_vs_hyparquet',
    value: krows / tPipeline,
    unit: 'krows/s',
    baseline: krows / tDirect,
  })
  emit({
    bench: 'zephyr',
    metric: 'parquet_pipeline_on_worker_krows_per_s_vs_hyparquet',
    value: krows / tWorker,
    unit: 'krows/s',
    baseline: krows / tDirect,
  })
  if (tLite !== undefined)
    emit({
      bench: 'zephyr',
      metric: 'parquet_pipeline_krows_per_s_vs_parquetjs_lite',
      value: krows / tPipeline,
      unit: 'krows/s',
      baseline: krows / tLite,
    })
}

try {
  if (process.env.ZEPHYR_BENCH_ONLY !== 'parquet') await jsonlToParquet()
  if (process.env.ZEPHYR_BENCH_ONLY !== 'jsonl') await parquetRead()
} finally {
  rmSync(root, { recursive: true, force: true })
}
