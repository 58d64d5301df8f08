/**
 * @module WARC reading speed (`pnpm bench warc`), on one core: the real records of the test
 * fixtures, bytes unchanged (webrecorder's example.com and iana.org crawls, and `real-pages.warc.gz`:
 * real German windows-1252 and iso-8859-1 news articles, Japanese Shift_JIS/CP932 pages, a GB2312
 * navigation box, a UTF-16LE page and a Shift_JIS Atom feed; see test-fixtures/warc/README.md),
 * repeated into a `.warc.gz` and a `.warc` of about ZEPHYR_WARC_BENCH_MB (default 64) each, read by
 * `readWarc` in this process, charset decoding included. Pages/s counts the HTML responses delivered
 * (the Atom feed and webrecorder's request/revisit records are read and passed over, as in a crawl);
 * MB/s counts the file's bytes (compressed for `.warc.gz`); each rate is also given by this process's CPU time
 * (`…_per_cpu_s`). Progress goes to stderr; stdout carries only the JSON lines.
 */
import { mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { gunzipSync } from 'node:zlib'
import { emit, median } from '@marin/rigging/bench'
import { readWarc } from '../src/readers/warc.js'

const say = (msg: string) => process.stderr.write(`[warc bench] ${msg}\n`)
const MB = Number(process.env.ZEPHYR_WARC_BENCH_MB ?? 64)
const RUNS = Number(process.env.ZEPHYR_BENCH_RUNS ?? 3)
const root = join(tmpdir(), `zephyr-warc-bench-${process.pid}`)
mkdirSync(root, { recursive: true })
const fixture = (f: string) => readFileSync(new URL(`../test-fixtures/warc/${f}`, import.meta.url))

// gzip members concatenate into a valid .warc.gz; uncompressed records concatenate into a .warc
const gz = Buffer.concat([fixture('example.warc.gz'), fixture('real-pages.warc.gz')])
const plain = Buffer.concat([gunzipSync(gz), fixture('example-iana.org-chunked.warc')])

function repeated(unit: Buffer, name: string): string {
  const path = join(root, name)
  const copies = Math.max(1, Math.round((MB * 2 ** 20) / unit.length))
  writeFileSync(path, Buffer.concat(Array.from({ length: copies }, () => unit)))
  return path
}

type Rates = { pagesPerS: number; mbPerS: number; pagesPerCpuS: number; mbPerCpuS: number; pages: number }

/** Medians of the runs, by wall time and by this process's CPU time (user + system, zlib's pool too). */
async function measure(path: string): Promise<Rates> {
  const walls: number[] = []
  const cpus: number[] = []
  let pages = 0
  for (let run = 0; run < RUNS; run++) {
    pages = 0
    const c0 = process.cpuUsage()
    const t0 = performance.now()
    for await (const batch of readWarc(path)) pages += batch.length
    walls.push((performance.now() - t0) / 1000)
    const c = process.cpuUsage(c0)
    cpus.push((c.user + c.system) / 1e6)
  }
  const mb = statSync(path).size / 2 ** 20
  const [wall, cpu] = [median(walls), median(cpus)]
  return { pagesPerS: pages / wall, mbPerS: mb / wall, pagesPerCpuS: pages / cpu, mbPerCpuS: mb / cpu, pages }
}

try {
  for (const [name, unit] of [
    ['warc_gz', gz],
    ['warc', plain],
  ] as const) {
    const path = repeated(unit, `bench.${name === 'warc_gz' ? 'warc.gz' : 'warc'}`)
    say(`${name}: ${(statSync(path).size / 2 ** 20).toFixed(1)} MB, ${RUNS} runs`)
    const r = await measure(path)
    say(`${name}: ${r.pages} pages`)
    emit({ bench: 'zephyr', metric: `read_${name}_pages_per_s_per_core`, value: r.pagesPerS, unit: 'pages/s' })
    emit({ bench: 'zephyr', metric: `read_${name}_mb_per_s_per_core`, value: r.mbPerS, unit: 'MB/s' })
    // by CPU time: the per-core rate when other processes share the cores
    emit({ bench: 'zephyr', metric: `read_${name}_pages_per_cpu_s`, value: r.pagesPerCpuS, unit: 'pages/CPU s' })
    emit({ bench: 'zephyr', metric: `read_${name}_mb_per_cpu_s`, value: r.mbPerCpuS, unit: 'MB/CPU s' })
  }
} finally {
  rmSync(root, { recursive: true, force: true })
}
