/**
 * @module Writes `real-pages.warc.gz` (run from the repository root:
 * `node_modules/.bin/tsx packages/zephyr/test-fixtures/warc/make-real-pages.ts`) from the real pages in `pages/`,
 * their bytes unchanged, one gzip member per record, with warcio's own writer: a `warcinfo` record, then one
 * `response` record per page. The pages come without the HTTP response they were served with, so the HTTP headers
 * are ours: `Content-Type` carries a charset only for the pages that declare none themselves (see README.md); every
 * other page is decoded by its own `<meta>` or XML declaration.
 * Dates and record ids are fixed, so the file is the same each time it is written.
 */
import { readFileSync, writeFileSync } from 'node:fs'
import { WARCRecord, WARCSerializer } from 'warcio'

const CHARDET = 'https://raw.githubusercontent.com/chardet/chardet/1355907628bff3148cc81ec77093b41d922436a7/tests'

/** In record order; the last one is large, so a cut near the end of the file falls inside it. */
const REAL_PAGES: readonly { file: string; url: string; type: string }[] = [
  {
    file: 'kyffhaeuser-nachrichten.de-Regen.html',
    url: 'https://kyffhaeuser-nachrichten.de/news/news_lang.php?ArtNr=335614',
    type: 'text/html',
  },
  {
    file: 'hardsoft.at.webry.info.xml',
    url: 'http://hardsoft.at.webry.info/200802/article_1.html',
    type: 'text/html',
  },
  { file: 'www2.chuo-u.ac.jp-suishin.xml', url: `${CHARDET}/CP932/www2.chuo-u.ac.jp-suishin.xml`, type: 'text/html' },
  {
    file: '_chromium_Shift-JIS_with_no_encoding_specified.html',
    url: `${CHARDET}/SHIFT_JIS/_chromium_Shift-JIS_with_no_encoding_specified.html`,
    type: 'text/html; charset=Shift_JIS',
  },
  {
    file: '_mozilla_bug171813_text.html',
    url: `${CHARDET}/GB2312/_mozilla_bug171813_text.html`,
    type: 'text/html; charset=GB2312',
  },
  {
    file: 'plane1-utf-16le.html',
    url: `${CHARDET}/UTF-16LE/plane1-utf-16le.html`,
    type: 'text/html; charset=UTF-16LE',
  },
  { file: 'ooganemochi.com.xml', url: 'http://www.ooganemochi.com/atom.xml', type: 'application/atom+xml' },
  {
    file: 'automobilwoche.de-VW-Betriebsversammlung.html',
    url:
      'https://www.automobilwoche.de/article/20211103/AGENTURMELDUNGEN/311039909/1276/' +
      'krach-vor-der-vw-betriebsversammlung-es-knirscht-zwischen-diess-und-aufsichtsraeten',
    type: 'text/html',
  },
]

const DATE = '2026-12-02T00:00:00Z'
const id = (n: number) => `<urn:uuid:7e57da7a-0000-4000-8000-${String(n).padStart(12, '0')}>`

async function main(): Promise<void> {
  const parts: Uint8Array[] = []
  const info = WARCRecord.createWARCInfo(
    { filename: 'real-pages.warc.gz', warcVersion: 'WARC/1.0', date: DATE },
    { software: 'warcio.js (make-real-pages.ts)', description: 'real pages from public repositories; see README.md' },
  )
  info.warcHeaders.headers.set('WARC-Record-ID', id(0))
  parts.push(await WARCSerializer.serialize(info, { gzip: true }))
  for (const [i, p] of REAL_PAGES.entries()) {
    const body = readFileSync(new URL(`./pages/${p.file}`, import.meta.url))
    const record = WARCRecord.create(
      {
        url: p.url,
        date: DATE,
        type: 'response',
        warcHeaders: { 'WARC-Record-ID': id(i + 1) },
        httpHeaders: { 'Content-Type': p.type, 'Content-Length': String(body.length) },
      },
      [new Uint8Array(body)],
    )
    parts.push(await WARCSerializer.serialize(record, { gzip: true }))
  }
  writeFileSync(new URL('./real-pages.warc.gz', import.meta.url), Buffer.concat(parts))
}

await main()
