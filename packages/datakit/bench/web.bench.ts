/**
 * The web path of @marin/datakit (`pnpm bench datakit`, topic `web`), on one core (one Node
 * thread; zlib's gunzip of a `.warc.gz` runs on libuv's pool, as it does in a worker):
 * - WARC reading with zephyr's `loadWarc` (one in-process worker): records/s and MB/s of the WARC stream (uncompressed
 *   bytes, so `.warc` and `.warc.gz` compare on the same work), for both forms;
 * - main-text extraction (`extractMainText`: Readability over linkedom): pages/s and MB/s of HTML;
 * - language ID (`languageIdentifier`, CLD3): documents/s and MB/s of extracted text (CLD3 reads
 *   at most the first `LANGUAGE_MAX_BYTES` of each document, as the step does).
 *
 * The corpus is built in memory from the committed WARC fixtures (packages/zephyr/test-fixtures/
 * warc: example.com, iana.org, our windows-1252 French, Shift_JIS Japanese and navigation-only
 * pages), repeated and varied to about `DATAKIT_WEB_BENCH_MB` MB of HTML (default 4): each copy
 * of an English page gets 3–10 Brown corpus paragraphs in its main content, each copy of the
 * French or Japanese page its own paragraphs repeated and rotated, and a page with no paragraph
 * (the navigation-only one) stays as it is (no main text, as a crawl has). The pages are written
 * as UTF-8 `response` records, once as a `.warc` and once as a `.warc.gz` (one gzip member per
 * record) in a scratch directory, then read back. Medians of `DATAKIT_BENCH_RUNS` runs (default 3).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { gzipSync } from 'node:zlib'
import { emit, median } from '@marin/rigging/bench'
import { Dataset, type WarcPage, ZephyrContext } from '@marin/zephyr'
import { brownParagraphs } from '../src/test-support/brown.js'
import { extractMainText } from '../src/web/extract.js'
import { LANGUAGE_MAX_BYTES, languageIdentifier } from '../src/web/language.js'

const bench = 'datakit'
const runs = Number(process.env.DATAKIT_BENCH_RUNS ?? 3)
const targetBytes = Number(process.env.DATAKIT_WEB_BENCH_MB ?? 4) * 1e6
const MB = 1e6
const fixtures = join(import.meta.dirname, '../../zephyr/test-fixtures/warc')

const context = new ZephyrContext({ inProcess: true, progress: 'off' })

/** A WARC file's HTML pages, through zephyr's `loadWarc` in this process (one worker). */
async function pagesOf(file: string): Promise<WarcPage[]> {
  return (await context.execute(Dataset.fromList([file]).loadWarc())).results
}

const templates: string[] = []
for (const f of ['example.warc.gz', 'example-iana.org-chunked.warc', 'written.warc.gz'])
  for (const p of await pagesOf(join(fixtures, f))) templates.push(p.html)
if (templates.length < 3)
  throw new Error(`web bench: expected the fixture pages in ${fixtures}, got ${templates.length}`)

const brown = brownParagraphs()
const escapeHtml = (s: string) => s.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;')

/** Copy `i` of a template page, varied as the module doc says. */
function vary(html: string, i: number): string {
  const own = [...html.matchAll(/<p>[\s\S]*?<\/p>/g)].map((m) => m[0])
  const nonLatin = /lang="(fr|ja)"/.test(html)
  if (nonLatin && own.length) {
    const k = 2 + (i % 4)
    const rotated = Array.from({ length: own.length * k }, (_, j) => own[(i + j) % own.length]!)
    return html.replace(own.join('\n'), rotated.join('\n')).replace(/(<h1>[^<]*)/, `$1 ${i}`)
  }
  if (!own.length) return html
  const n = 3 + (i % 8)
  const paras = Array.from({ length: n }, (_, j) => `<p>${escapeHtml(brown[(i * 7 + j) % brown.length]!)}</p>`)
  const at = html.lastIndexOf('</p>') + 4
  return `${html.slice(0, at)}\n${paras.join('\n')}${html.slice(at)}`
}

const corpus: string[] = []
let htmlBytes = 0
for (let i = 0; htmlBytes < targetBytes; i++) {
  const page = vary(templates[i % templates.length]!, Math.floor(i / templates.length))
  corpus.push(page)
  htmlBytes += Buffer.byteLength(page)
}

function warcRecord(html: string, i: number): Buffer {
  const body = Buffer.from(html)
  const http = Buffer.concat([
    Buffer.from(`HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: ${body.length}\r\n\r\n`),
    body,
  ])
  const id = `00000000-0000-4000-8000-${i.toString(16).padStart(12, '0')}`
  const head =
    'WARC/1.0\r\nWARC-Type: response\r\n' +
    `WARC-Target-URI: http://bench.example/${i}\r\nWARC-Date: 2024-01-01T00:00:00Z\r\n` +
    `WARC-Record-ID: <urn:uuid:${id}>\r\nContent-Type: application/http; msgtype=response\r\n` +
    `Content-Length: ${http.length}\r\n\r\n`
  return Buffer.concat([Buffer.from(head), http, Buffer.from('\r\n\r\n')])
}

const root = mkdtempSync(join(tmpdir(), 'datakit-web-bench-'))
const records = corpus.map(warcRecord)
const warcBytes = records.reduce((a, r) => a + r.length, 0)
const plain = join(root, 'bench.warc')
const gz = join(root, 'bench.warc.gz')
writeFileSync(plain, Buffer.concat(records))
writeFileSync(gz, Buffer.concat(records.map((r) => gzipSync(r))))
process.stderr.write(
  `web: ${corpus.length} pages from ${templates.length} fixture pages, ${(htmlBytes / MB).toFixed(2)} MB of HTML, ` +
    `${(warcBytes / MB).toFixed(2)} MB of WARC\n`,
)

async function seconds(fn: () => Promise<unknown> | unknown): Promise<number> {
  const t0 = process.hrtime.bigint()
  await fn()
  return Number(process.hrtime.bigint() - t0) / 1e9
}

try {
  // 1. WARC reading, both forms interleaved.
  const times: Record<'warc' | 'warc_gz', number[]> = { warc: [], warc_gz: [] }
  for (let r = 0; r <= runs; r++) {
    for (const [form, file] of [
      ['warc', plain],
      ['warc_gz', gz],
    ] as const) {
      let n = 0
      const t = await seconds(async () => {
        n = (await pagesOf(file)).length
      })
      if (n !== corpus.length) throw new Error(`web bench: read ${n} records from ${file}, wrote ${corpus.length}`)
      if (r > 0) times[form].push(t) // the first round warms up
    }
  }
  for (const form of ['warc', 'warc_gz'] as const) {
    const t = median(times[form])
    emit({ bench, metric: `web_read_${form}_records_per_s`, value: corpus.length / t, unit: 'records/s' })
    emit({ bench, metric: `web_read_${form}_mb_per_s`, value: warcBytes / MB / t, unit: 'MB/s' })
  }

  // 2. Main-text extraction.
  let texts: string[] = []
  const extractTimes: number[] = []
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
  const te = median(extractTimes)
  process.stderr.write(`web: ${texts.length} of ${corpus.length} pages have main text\n`)
  emit({ bench, metric: 'web_extract_pages_per_s', value: corpus.length / te, unit: 'pages/s' })
  emit({ bench, metric: 'web_extract_html_mb_per_s', value: htmlBytes / MB / te, unit: 'MB/s' })

  // 3. Language ID on the extracted documents.
  const lid = await languageIdentifier()
  const textBytes = texts.reduce((a, s) => a + Buffer.byteLength(s), 0)
  const langs = new Map<string, number>()
  const lidTimes: number[] = []
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
  const tl = median(lidTimes)
  process.stderr.write(
    `web: languages ${JSON.stringify(Object.fromEntries(langs))}; ` +
      `CLD3 reads ≤ ${LANGUAGE_MAX_BYTES} bytes a document\n`,
  )
  emit({ bench, metric: 'web_langid_docs_per_s', value: texts.length / tl, unit: 'documents/s' })
  emit({ bench, metric: 'web_langid_text_mb_per_s', value: textBytes / MB / tl, unit: 'MB/s' })
} finally {
  await context.close()
  rmSync(root, { recursive: true, force: true })
}
