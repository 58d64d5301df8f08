/**
 * The web steps on real WARC files (zephyr's test fixtures: webrecorder's example.com and
 * iana.org crawls, and our windows-1252 / Shift_JIS / navigation-only pages) in a real store.
 */
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { ParquetReader, ZephyrContext } from '@marin/zephyr'
import { afterAll, describe, expect, test } from 'vitest'
import { openDataset } from '../dataset/open-dataset.js'
import { blockText, extractMainText } from './extract.js'
import { filterLanguage, ingestWarc } from './ingest-warc.js'
import { keepLanguage, languageIdentifier } from './language.js'

const root = mkdtempSync(join(tmpdir(), 'datakit-web-'))
const prefix = join(root, 'marin')
const context = new ZephyrContext({ inProcess: true, progress: 'off' })
afterAll(async () => {
  await context.close()
  rmSync(root, { recursive: true, force: true })
})
const fixtures = fileURLToPath(new URL('../../../zephyr/test-fixtures/warc/', import.meta.url))

describe('extractMainText', () => {
  test('headings, paragraphs, list items and <br> stay apart; a nav-only page has no main text', () => {
    const html = `<html><head><title>T</title></head><body><nav><a href="/">Home</a></nav><article>
      <h1>A heading</h1><p>First paragraph of the article, long enough to count as text.</p>
      <ul><li>one item</li><li>another item</li></ul><p>Line one<br>line two of the last paragraph.</p>
      </article></body></html>`
    const got = extractMainText(html)
    expect(got).toMatchObject({ title: 'T' })
    const text = (got as { text: string }).text
    expect(text).toContain('First paragraph of the article, long enough to count as text.\n\none item\nanother item')
    expect(text).toContain('Line one\nline two of the last paragraph.')
    expect(text).not.toMatch(/heading\S*First/)
    expect(extractMainText('<html><body><nav><a href="/">Home</a> <a href="/x">X</a></nav></body></html>')).toBe(
      'noMainText',
    )
    expect(extractMainText(`<p>${'x'.repeat(100)}</p>`, { maxHtmlBytes: 50 })).toBe('tooLarge')
  })

  test('blockText keeps a <pre> block’s own line breaks', async () => {
    const { parseHTML } = await import('linkedom')
    const { document } = parseHTML('<html><body><pre>a  b\nc</pre><p>d</p></body></html>')
    expect(blockText(document.body as never)).toBe('a b\nc\n\nd')
  })
})

describe('language identification', () => {
  test('CLD3 tags English, French and Japanese; no letters is und', async () => {
    const lid = await languageIdentifier()
    expect(lid.identify('This domain is for use in illustrative examples in documents.')).toMatchObject({
      language: 'en',
      reliable: true,
    })
    expect(lid.identify('Chaque matin, le café ouvre à sept heures et sert des croissants.').language).toBe('fr')
    expect(lid.identify('京都の秋は紅葉で有名です。').language).toBe('ja')
    expect(lid.identify('  12 34 ')).toEqual({ language: 'und', score: 0, reliable: false })
    expect(keepLanguage({ language: 'en', score: 0.4, reliable: true }, { languages: ['en'] })).toBe(false)
  })
})

describe('ingestWarc and filterLanguage', () => {
  test('real WARCs → tagged documents with counts; a truncated file is read up to its cut', async () => {
    const dir = join(root, 'warcs')
    rmSync(dir, { recursive: true, force: true })
    const { mkdirSync } = await import('node:fs')
    mkdirSync(dir, { recursive: true })
    for (const f of ['example.warc.gz', 'example-iana.org-chunked.warc', 'written.warc.gz'])
      copyFileSync(join(fixtures, f), join(dir, f))
    const written = readFileSync(join(fixtures, 'written.warc.gz'))
    writeFileSync(join(dir, 'cut.warc.gz'), written.subarray(0, written.length - 700))

    const r = await ingestWarc('web', { source: join(dir, '*.warc*'), prefix, context })
    expect(r.reused).toBe(false)
    // example.com, iana.org, café, Kyoto, the nav-only page; café and Kyoto again from the copy cut in the third
    expect(r.stats).toMatchObject({
      pagesRead: 7,
      kept: 6,
      noMainText: 1,
      skipped: { truncated: 1 },
      byLanguage: { en: 2, fr: 2, ja: 2 },
    })
    expect(r.stats.skips[0]).toMatchObject({ reason: 'truncated', file: expect.stringContaining('cut.warc.gz') })
    const v = await openDataset('web', { prefix })
    const docs: { text: string; source: string; meta: string }[] = []
    for (const s of v.shards) for await (const row of new ParquetReader({ path: s })) docs.push(row as never)
    const cafe = docs.find((d) => d.source === 'http://cafe.example.fr/')!
    expect(cafe.text).toContain('coûte 1,20 € au comptoir')
    expect(JSON.parse(cafe.meta)).toMatchObject({
      url: 'http://cafe.example.fr/',
      date: '2024-05-01T12:00:00Z',
      warcRecordId: '<urn:uuid:00000000-0000-4000-8000-000000000001>',
      charset: 'windows-1252',
      language: 'fr',
      languageReliable: true,
    })

    const again = await ingestWarc('web', { source: join(dir, '*.warc*'), prefix, context })
    expect(again).toMatchObject({ reused: true, version: r.version })

    const en = await filterLanguage('web', { languages: ['en'], output: 'web-en', prefix, context })
    expect(en.stats).toMatchObject({ pagesRead: 6, kept: 2, droppedLanguage: 4, byLanguage: { en: 2 } })
    const same = await filterLanguage('web', { languages: ['en'], output: 'web-en', prefix, context })
    expect(same.reused).toBe(true)
    const stricter = await filterLanguage('web', {
      languages: ['en'],
      threshold: 0.9,
      output: 'web-en',
      prefix,
      context,
    })
    expect(stricter.reused).toBe(false)
    expect(stricter.version).toBe(en.version + 1)
  })

  test('bad arguments name what is wrong', async () => {
    await expect(filterLanguage('web', { languages: [], prefix })).rejects.toThrow(/languages must be a non-empty/)
    await expect(filterLanguage('web', { languages: ['en'], threshold: 2, prefix })).rejects.toThrow(/threshold/)
  })
})
