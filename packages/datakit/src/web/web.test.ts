/**
 * The web steps on real WARC files (zephyr's test fixtures: webrecorder's example.com and
 * iana.org crawls, and real-pages.warc.gz: real German windows-1252, Japanese Shift_JIS, Chinese
 * GB2312 navigation-only and UTF-16 pages from public repositories) in a real store.
 */
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Dataset, ParquetReader, type WarcPage, ZephyrContext } from '@marin/zephyr'
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
    // 3 of 228 characters U+FFFD (over 1 %): undecodable; 1 of 226 is kept
    const words = 'The quick brown fox jumps over the lazy dog. '.repeat(5).trim()
    const page = (p: string) => `<html><head><title>T</title></head><body><article><p>${p}</p></article></body></html>`
    expect(extractMainText(page(`${words} \uFFFD\uFFFD\uFFFD`))).toBe('undecodable')
    expect(extractMainText(page(`${words} \uFFFD`))).toMatchObject({ text: `${words} \uFFFD` })
  })

  test('real pages via the WARC reader: main text in its own script; the navigation box has none', async () => {
    const pages = (await context.execute(Dataset.fromList([join(fixtures, 'real-pages.warc.gz')]).loadWarc())).results
    const text = (host: string, i = 0) => {
      const got = extractMainText(pages.filter((p: WarcPage) => p.url.includes(host))[i]!.html)
      return typeof got === 'string' ? got : got.text
    }
    const kyff = text('kyffhaeuser-nachrichten.de')
    expect(kyff).toMatch(/^Das Wetter eignet sich ja bekanntermaßen exzellent dazu, behäbige Konversation zu beleben/)
    expect(kyff).toContain('Statt herkömmlichem Herbstwetter brachte der Oktober 2023 sehr viel Regen')
    expect(kyff).not.toContain('Login für Vote') // the page's menu is not main text
    const hardsoft = text('hardsoft.at.webry.info')
    expect(hardsoft).toContain('perldoc の Encode::JP を読むと、Shift JISには3種類ある。')
    expect(hardsoft).toContain('うっすらとわかっているけれど、気持ち悪いので調べてみた。')
    expect(text('chardet', 0)).toContain(
      'このページに使われている漢字コードはＳＪＩＳです。\nしかも、使っている字は、Windowsの外字です。',
    )
    expect(text('chardet', 1)).toMatch(/^衆院議院運営委員会は９日午後の理事会で/)
    expect(text('UTF-16LE')).toContain('𐐒𐑉𐐮𐑀𐐲𐑋 𐐏𐐲𐑍') // Brigham Young, in Deseret
    // Mozilla bug 171813's page: a sohu.com box of four links, no main text
    expect(extractMainText(pages.find((p: WarcPage) => p.url.includes('GB2312'))!.html)).toBe('noMainText')
    const autowoche = extractMainText(pages.find((p: WarcPage) => p.url.includes('automobilwoche'))!.html)
    expect(autowoche).toMatchObject({
      title: 'Krach vor der VW-Betriebsversammlung: Es knirscht zwischen Diess und Aufsichtsräten',
      text: expect.stringMatching(/^Der wieder aufgeflammte Streit zwischen VW-Chef Herbert Diess und mehreren/),
    })
    expect((autowoche as { text: string }).text).not.toContain('EXKLUSIV – Mitarbeiter lehnen Transfer ab') // sidebar
    for (const p of pages) expect(JSON.stringify(extractMainText(p.html))).not.toMatch(/\uFFFD|\\ufffd/i)
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

  test('the CP932 blog page is zh: its first 2000 bytes (what CLD3 reads) are kanji tables, not code', async () => {
    const lid = await languageIdentifier()
    const pages = (await context.execute(Dataset.fromList([join(fixtures, 'real-pages.warc.gz')]).loadWarc())).results
    const got = extractMainText(pages.find((p: WarcPage) => p.url.includes('hardsoft.at.webry.info'))!.html)
    const text = (got as { text: string }).text
    // the main text: a few lines of Japanese prose, a 13-line Perl program in <code>, then the article's subject,
    // tables of the kanji and symbols in each Shift_JIS variant (in <blockquote>s), with a line of prose between
    const code = text.slice(text.indexOf('use utf8;'), text.indexOf('}\n') + 1)
    expect(code.split('\n')).toHaveLength(13)
    expect(lid.identify(text)).toMatchObject({ language: 'zh', reliable: true })
    // without the code block it is still zh: identifying the text without code is no cure, so the pipeline keeps
    // CLD3's answer on the whole main text
    expect(lid.identify(text.replace(code, ''))).toMatchObject({ language: 'zh', reliable: true })
    // its prose alone (everything up to the first table) is ja
    const prose = text.slice(0, text.indexOf('NEC: JIS X 0212-1990')).replace(code, '')
    expect(lid.identify(prose)).toMatchObject({ language: 'ja', reliable: true })
  })
})

describe('ingestWarc and filterLanguage', () => {
  test('real WARCs → tagged documents with counts; a truncated file is read up to its cut', async () => {
    const dir = join(root, 'warcs')
    rmSync(dir, { recursive: true, force: true })
    const { mkdirSync } = await import('node:fs')
    mkdirSync(dir, { recursive: true })
    for (const f of ['example.warc.gz', 'example-iana.org-chunked.warc', 'real-pages.warc.gz'])
      copyFileSync(join(fixtures, f), join(dir, f))
    // cut inside its last member (the automobilwoche.de page): the six pages before it are read
    const real = readFileSync(join(fixtures, 'real-pages.warc.gz'))
    writeFileSync(join(dir, 'cut.warc.gz'), real.subarray(0, real.length - 2000))

    const r = await ingestWarc('web', { source: join(dir, '*.warc*'), prefix, context })
    expect(r.reused).toBe(false)
    // example.com and iana.org; from real-pages: two German articles, three Japanese pages, the UTF-16 page (en) and
    // the sohu.com box (no main text); from its cut copy the same six pages before automobilwoche.de
    expect(r.stats).toMatchObject({
      pagesRead: 15,
      kept: 13,
      noMainText: 2,
      skipped: { truncated: 1 },
      byLanguage: { en: 4, de: 3 },
    })
    // the three Japanese pages, twice: CLD3 reads the CP932 blog page (mostly kanji tables) as zh, see above
    expect((r.stats.byLanguage.ja ?? 0) + (r.stats.byLanguage.zh ?? 0)).toBe(6)
    expect(r.stats.skips[0]).toMatchObject({ reason: 'truncated', file: expect.stringContaining('cut.warc.gz') })
    const v = await openDataset('web', { prefix })
    const docs: { text: string; source: string; meta: string }[] = []
    for (const s of v.shards) for await (const row of new ParquetReader({ path: s })) docs.push(row as never)
    const url = (host: string) => docs.filter((d) => d.source.includes(host))
    expect(url('automobilwoche.de')).toHaveLength(1)
    const autowoche = url('automobilwoche.de')[0]!
    expect(autowoche.text).toContain('Aber die Stimmung, so hieß es bei mehreren Personen im Umfeld der Kontrolleure')
    expect(JSON.parse(autowoche.meta)).toMatchObject({
      url: autowoche.source,
      date: '2026-12-02T00:00:00Z',
      warcRecordId: '<urn:uuid:7e57da7a-0000-4000-8000-000000000008>',
      charset: 'windows-1252',
      language: 'de',
      languageReliable: true,
    })
    const hardsoft = url('hardsoft.at.webry.info')
    expect(hardsoft).toHaveLength(2)
    expect(hardsoft[0]!.text).toContain('Shift JISには3種類ある。')
    expect(JSON.parse(hardsoft[0]!.meta)).toMatchObject({ charset: 'shift_jis' })
    const yomiuri = url('_chromium_Shift-JIS')
    expect(yomiuri[0]!.text).toMatch(/^衆院議院運営委員会は９日午後の理事会で/)
    expect(JSON.parse(yomiuri[0]!.meta)).toMatchObject({ charset: 'shift_jis', language: 'ja', languageReliable: true })
    expect(url('GB2312')).toEqual([])

    const again = await ingestWarc('web', { source: join(dir, '*.warc*'), prefix, context })
    expect(again).toMatchObject({ reused: true, version: r.version })

    const en = await filterLanguage('web', { languages: ['en'], output: 'web-en', prefix, context })
    // the UTF-16 page's text is mostly Plane 1 scripts: CLD3's en is below the default threshold
    expect(en.stats).toMatchObject({ pagesRead: 13, kept: 2, droppedLanguage: 11, byLanguage: { en: 2 } })
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

  test('a real Shift_JIS page served as UTF-8 is skipped as undecodable, with its file and offset', async () => {
    const page = readFileSync(join(fixtures, 'pages/_chromium_Shift-JIS_with_no_encoding_specified.html'))
    const record = (charset: string, i: number) => {
      const http = Buffer.concat([
        Buffer.from(`HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=${charset}\r\n\r\n`),
        page,
      ])
      const head =
        `WARC/1.0\r\nWARC-Type: response\r\nWARC-Target-URI: http://news.example/${charset}\r\n` +
        `WARC-Date: 2026-12-02T00:00:00Z\r\nWARC-Record-ID: <urn:uuid:00000000-0000-4000-8000-00000000000${i}>\r\n` +
        `Content-Type: application/http; msgtype=response\r\nContent-Length: ${http.length}\r\n\r\n`
      return Buffer.concat([Buffer.from(head), http, Buffer.from('\r\n\r\n')])
    }
    const good = record('Shift_JIS', 1)
    const file = join(root, 'mislabelled.warc')
    writeFileSync(file, Buffer.concat([good, record('utf-8', 2)]))
    const r = await ingestWarc('web-mislabelled', { source: file, prefix, context })
    expect(r.stats).toMatchObject({ pagesRead: 2, kept: 1, skipped: { undecodable: 1 }, byLanguage: { ja: 1 } })
    expect(r.stats.skips).toEqual([
      {
        reason: 'undecodable',
        file: expect.stringContaining('mislabelled.warc'),
        offset: good.length,
        url: expect.stringContaining('utf-8'),
      },
    ])
  })

  test('bad arguments name what is wrong', async () => {
    await expect(filterLanguage('web', { languages: [], prefix })).rejects.toThrow(/languages must be a non-empty/)
    await expect(filterLanguage('web', { languages: ['en'], threshold: 2, prefix })).rejects.toThrow(/threshold/)
  })
})

test('WARC ingest and the language filter run on worker processes (CLD3 loaded there)', async () => {
  const workers = new ZephyrContext({ maxWorkers: 1, progress: 'off' })
  try {
    const into = { prefix, context: workers }
    const r = await ingestWarc('web-w', { ...into, source: join(fixtures, 'real-pages.warc.gz') })
    expect(r.stats).toMatchObject({ pagesRead: 7, kept: 6, noMainText: 1, byLanguage: { de: 2, ja: 2, zh: 1, en: 1 } })
    const de = await filterLanguage('web-w', { ...into, languages: ['de'], output: 'web-w-de' })
    expect(de.stats).toMatchObject({ pagesRead: 6, kept: 2, droppedLanguage: 4, byLanguage: { de: 2 } })
  } finally {
    await workers.close()
  }
}, 60_000)
