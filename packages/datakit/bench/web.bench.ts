/**
 * The web path of @marin/datakit (`pnpm bench datakit`, topic `web`), on one core (one Node
 * thread; zlib's gunzip of a `.warc.gz` runs on libuv's pool, as it does in a worker):
 * - WARC reading with zephyr's `loadWarc` (one in-process worker): HTML pages/s and MB/s of the WARC stream
 *   (uncompressed bytes, so `.warc` and `.warc.gz` compare on the same work), for both forms;
 * - main-text extraction (`extractMainText`: Readability over linkedom): pages/s and MB/s of HTML;
 * - language ID (`languageIdentifier`, CLD3): documents/s and MB/s of extracted text (CLD3 reads
 *   at most the first `LANGUAGE_MAX_BYTES` of each document, as the step does).
 *
 * The corpus is the committed real WARC records of zephyr's test fixtures, bytes unchanged
 * (packages/zephyr/test-fixtures/warc, sources and licences in its README): webrecorder's example.com
 * and iana.org crawls, and `real-pages.warc.gz`'s German windows-1252/iso-8859-1 news articles, Japanese
 * Shift_JIS/CP932 blog and university pages, a GB2312 navigation box (no main text, as a crawl has), a
 * UTF-16LE page and a Shift_JIS Atom feed (not HTML: read and passed over). One copy of them is a
 * `.warc.gz` of one gzip member per fixture record (iana.org's file as one member) and its gunzipped
 * `.warc`; copies are repeated to about `DATAKIT_WEB_BENCH_MB` MB of WARC (default 8), each record
 * keeping its source's `WARC-Target-URI`. The pages read back (charsets decoded) are the corpus of
 * extraction and language ID; HTML MB/s counts them as UTF-8. Each rate is given by wall time and, as
 * `…_per_cpu_s`, by this process's CPU time (the per-core rate on a machine other processes share).
 * Medians of `DATAKIT_BENCH_RUNS` runs (default 3), after a warm-up round.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { gunzipSync, gzipSync } from 'node:zlib'
import { emit, median } from '@marin/rigging/bench'
import { Dataset, type WarcPage, ZephyrContext } from '@marin/zephyr'
import { extractMainText } from '../src/web/extract.js'
import { LANGUAGE_MAX_BYTES, languageIdentifier } from '../src/web/language.js'

const bench = 'datakit'
const runs = Number(process.env.DATAKIT_BENCH_RUNS ?? 3)
const targetBytes = Number(process.env.DATAKIT_WEB_BENCH_MB ?? 8) * 1e6
const MB = 1e6
const fixtures = join(import.meta.dirname, '../../zephyr/test-fixtures/warc')
const fixture = (f: string) => readFileSync(join(fixtures, f))

const context = new ZephyrContext({ inProcess: true, progress: 'off' })

/** A WARC file's HTML pages, through zephyr's `loadWarc` in this process (one worker). */
async function pagesOf(file: string): Promise<WarcPage[]> {
  return (await context.execute(Dataset.fromList([file]).loadWarc())).results
}

// gzip members concatenate into a valid .warc.gz, and its gunzipped bytes into a valid .warc
const unitGz = Buffer.concat([
  fixture('example.warc.gz'),
  gzipSync(fixture('example-iana.org-chunked.warc')),
  fixture('real-pages.warc.gz'),
])
const unit = gunzipSync(unitGz)
const copies = Math.max(1, Math.round(targetBytes / unit.length))
const root = mkdtempSync(join(tmpdir(), 'datakit-web-bench-'))
const plain = join(root, 'bench.warc')
const gz = join(root, 'bench.warc.gz')
writeFileSync(plain, Buffer.concat(Array.from({ length: copies }, () => unit)))
writeFileSync(gz, Buffer.concat(Array.from({ length: copies }, () => unitGz)))
const warcBytes = unit.length * copies

const corpus = (await pagesOf(plain)).map((p) => p.html)
const perCopy = corpus.length / copies
if (perCopy < 8) throw new Error(`web bench: expected the real fixture pages in ${fixtures}, got ${perCopy} a copy`)
const htmlBytes = corpus.reduce((a, h) => a + Buffer.byteLength(h), 0)
process.stderr.write(
  `web: ${copies} copies of the fixture records (${perCopy} HTML pages each), ${corpus.length} pages, ` +
    `${(warcBytes / MB).toFixed(2)} MB of WARC, ${(htmlBytes / MB).toFixed(2)} MB of HTML\n`,
)

type Timing = { wall: number; cpu: number }

/** Wall seconds, and this process's CPU seconds (user + system, all its threads: zlib's pool too). */
async function seconds(fn: () => Promise<unknown> | unknown): Promise<Timing> {
  const c0 = process.cpuUsage()
  const t0 = process.hrtime.bigint()
  await fn()
  const wall = Number(process.hrtime.bigint() - t0) / 1e9
  const c = process.cpuUsage(c0)
  return { wall, cpu: (c.user + c.system) / 1e6 }
}

/**
 * `<prefix>_<count>_per_s` and `<prefix>_<mb>_per_s` by wall time, and the same `_per_cpu_s` by CPU time (the
 * per-core rate when other processes share the cores), medians of the runs.
 */
function emitRates(prefix: string, count: [string, string, number], mb: [string, number], runs: Timing[]): void {
  const [countName, countUnit, n] = count
  const [mbName, bytes] = mb
  const wall = median(runs.map((r) => r.wall))
  const cpu = median(runs.map((r) => r.cpu))
  emit({ bench, metric: `${prefix}_${countName}_per_s`, value: n / wall, unit: `${countUnit}/s` })
  emit({ bench, metric: `${prefix}_${mbName}_per_s`, value: bytes / MB / wall, unit: 'MB/s' })
  emit({ bench, metric: `${prefix}_${countName}_per_cpu_s`, value: n / cpu, unit: `${countUnit}/CPU s` })
  emit({ bench, metric: `${prefix}_${mbName}_per_cpu_s`, value: bytes / MB / cpu, unit: 'MB/CPU s' })
}

try {
  // 1. WARC reading, both forms interleaved.
  const times: Record<'warc' | 'warc_gz', Timing[]> = { warc: [], warc_gz: [] }
  for (let r = 0; r <= runs; r++) {
    for (const [form, file] of [
      ['warc', plain],
      ['warc_gz', gz],
    ] as const) {
      let n = 0
      const t = await seconds(async () => {
        n = (await pagesOf(file)).length
      })
      if (n !== corpus.length) throw new Error(`web bench: read ${n} pages from ${file}, expected ${corpus.length}`)
      if (r > 0) times[form].push(t) // the first round warms up
    }
  }
  for (const form of ['warc', 'warc_gz'] as const)
    emitRates(`web_read_${form}`, ['pages', 'pages', corpus.length], ['mb', warcBytes], times[form])

  // 2. Main-text extraction.
  let texts: string[] = []
  const extractTimes: Timing[] = []
  for (let r = 0; r <= runs; r++) {
    const got: string[] = []
    const t = await seconds(() => {
      for (const html of corpus) {
        const e = extractMainText(html)
        if (typeof e !== 'string') got.push(e.text)
      }
    })
    if (r > 0) extractTimes.push(t)
    texts = got
  }
  process.stderr.write(`web: ${texts.length} of ${corpus.length} pages have main text\n`)
  emitRates('web_extract', ['pages', 'pages', corpus.length], ['html_mb', htmlBytes], extractTimes)

  // 3. Language ID on the extracted documents.
  const lid = await languageIdentifier()
  const textBytes = texts.reduce((a, s) => a + Buffer.byteLength(s), 0)
  const langs = new Map<string, number>()
  const lidTimes: Timing[] = []
  for (let r = 0; r <= runs; r++) {
    langs.clear()
    const t = await seconds(() => {
      for (const s of texts) {
        const g = lid.identify(s)
        langs.set(g.language, (langs.get(g.language) ?? 0) + 1)
      }
    })
    if (r > 0) lidTimes.push(t)
  }
  process.stderr.write(
    `web: languages ${JSON.stringify(Object.fromEntries(langs))}; ` +
      `CLD3 reads ≤ ${LANGUAGE_MAX_BYTES} bytes a document\n`,
  )
  emitRates('web_langid', ['docs', 'documents', texts.length], ['text_mb', textBytes], lidTimes)
} finally {
  await context.close()
  rmSync(root, { recursive: true, force: true })
}
