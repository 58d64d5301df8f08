import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { gunzipSync } from 'node:zlib'
import { describe, expect, test } from 'vitest'
import { ZephyrContext } from '../context.js'
import { emptyTaskCounters } from '../counters.js'
import { Dataset } from '../dataset.js'
import { tempDir } from '../fixtures/tmp.js'
import { decodeHtml, readWarc, type WarcOptions, type WarcPage, type WarcSkip } from './warc.js'

const ctx = new ZephyrContext({ inProcess: true, progress: 'off' })
const fixture = (f: string) => fileURLToPath(new URL(`../../test-fixtures/warc/${f}`, import.meta.url))
const page = (f: string) => fixture(`pages/${f}`)
const host = (url: string) => new URL(url).host

async function drain(url: string, opts?: WarcOptions) {
  const counters = emptyTaskCounters()
  const out: (WarcPage | WarcSkip)[] = []
  try {
    for await (const batch of readWarc(url, opts, counters)) out.push(...batch)
  } catch (error) {
    return { out, counters, error }
  }
  return { out, counters, error: undefined }
}

describe('readWarc on real WARC files', () => {
  test('example.warc.gz (warcio test data): the one HTML response, gzip content-encoding decoded', async () => {
    const { out, counters } = await drain(fixture('example.warc.gz'))
    expect(out).toHaveLength(1)
    const page = out[0] as WarcPage
    expect(page).toMatchObject({
      url: 'http://example.com/',
      date: '2017-03-06T04:02:06Z',
      recordId: '<urn:uuid:a9c51e3e-0221-11e7-bf66-0242ac120005>',
      contentType: 'text/html',
      httpStatus: 200,
      charset: 'utf-8',
      offset: 1197,
    })
    expect(page.html).toContain('This domain is established to be used for illustrative examples')
    expect(counters.skippedRecords).toBe(0)
  })

  test('a chunked iana.org response is de-chunked; other record types are kept when asked', async () => {
    const { out } = await drain(fixture('example-iana.org-chunked.warc'))
    expect(out).toHaveLength(1)
    expect((out[0] as WarcPage).html).toMatch(/^<!doctype html>[\s\S]*<\/html>\s*$/)
    const all = await drain(fixture('example-iana.org-chunked.warc'), {
      recordTypes: ['warcinfo', 'response', 'request'],
      contentTypes: '*',
    })
    expect(all.out.map((r) => (r as WarcPage).url)).toEqual(['', 'http://www.iana.org/', 'http://www.iana.org/'])
  })

  test('real pages in legacy charsets decode by their own declaration or the HTTP header, not mojibake', async () => {
    const { out, counters } = await drain(fixture('real-pages.warc.gz'))
    const pages = out as WarcPage[]
    // the Atom feed is not HTML, so it is left out (not counted as skipped)
    expect(pages.map((p) => [host(p.url), p.charset])).toEqual([
      ['kyffhaeuser-nachrichten.de', 'windows-1252'], // <meta charset=iso-8859-1>: windows-1252 by the standard
      ['hardsoft.at.webry.info', 'shift_jis'], // <meta http-equiv> Shift_JIS, with CP932 characters
      ['raw.githubusercontent.com', 'shift_jis'], // chuo-u.ac.jp: <meta http-equiv> x-sjis
      ['raw.githubusercontent.com', 'shift_jis'], // no declaration: Shift_JIS from the HTTP header
      ['raw.githubusercontent.com', 'gbk'], // no declaration: GB2312 from the HTTP header
      ['raw.githubusercontent.com', 'utf-16le'], // UTF-16LE from the HTTP header (its <meta> says UTF-16)
      ['www.automobilwoche.de', 'windows-1252'], // <meta charset="windows-1252">
    ])
    expect(counters.skippedRecords).toBe(0)
    const [kyff, hardsoft, chuo, yomiuri, sohu, plane1, autowoche] = pages.map((p) => p.html)
    expect(kyff).toContain('Login für Vote')
    // byte 0x85 under an iso-8859-1 label: windows-1252's ellipsis, not a C1 control
    expect(kyff).toContain('Die deutsche f&ouml;derale B&uuml;rokratie …</a>')
    expect(hardsoft).toContain(
      '<title>Perl 5.8.x で shiftjis 、CP932、MacJapanese の違い ハードなソフトの話/ウェブリブログ',
    )
    expect(hardsoft).toContain('うっすらとわかっているけれど、気持ち悪いので調べてみた。')
    expect(chuo).toContain('このページに使われている漢字コードはＳＪＩＳです。')
    expect(chuo).toContain('ｱｲｳｴｵ<br>') // half-width katakana
    expect(chuo).toContain('纊 褜 鍈 銈') // IBM extensions (Shift_JIS FA40–), which CP932 and the standard decode
    expect(yomiuri).toContain('衆院議院運営委員会は９日午後の理事会で、１３日に本会議を開き')
    expect(sohu).toContain('搜狐在线国庆免费大酬宾')
    expect(plane1).toContain('<title>Unicode Plane 1 Example Using UTF-16</title>')
    expect(plane1).toContain('𐐒𐑉𐐮𐑀𐐲𐑋 𐐏𐐲𐑍') // Brigham Young in Deseret (surrogate pairs)
    expect(autowoche).toContain('Es knirscht zwischen Diess und Aufsichtsräten | Automobilwoche</title>')
    expect(autowoche).toContain('EXKLUSIV – Mitarbeiter lehnen Transfer ab') // 0x96: windows-1252's en dash
    for (const html of pages.map((p) => p.html)) expect(html).not.toMatch(/[\uFFFD\x80-\x9F]/)
    // the payloads are the committed pages, byte for byte
    expect(pages[6]!.html).toBe(decodeHtml(readFileSync(page('automobilwoche.de-VW-Betriebsversammlung.html'))).text)
  })

  test('the real Atom feed is read when asked for, by its XML declaration (Shift_JIS)', async () => {
    const { out } = await drain(fixture('real-pages.warc.gz'), { contentTypes: ['application/atom+xml'] })
    expect(out).toHaveLength(1)
    const feed = out[0] as WarcPage
    expect(feed).toMatchObject({ url: 'http://www.ooganemochi.com/atom.xml', contentType: 'application/atom+xml' })
    expect(feed.charset).toBe('shift_jis')
    expect(feed.html).toContain('<title>ブログで大金持ち</title>')
  })

  test('a real .warc.gz cut inside its last member: the complete records first, then an error naming it', async () => {
    const dir = tempDir()
    const bytes = readFileSync(fixture('real-pages.warc.gz'))
    const cut = join(dir, 'cut.warc.gz')
    writeFileSync(cut, bytes.subarray(0, bytes.length - 2000))
    const failed = await drain(cut)
    expect(failed.out.map((r) => host((r as WarcPage).url))).toEqual([
      'kyffhaeuser-nachrichten.de',
      'hardsoft.at.webry.info',
      ...Array(4).fill('raw.githubusercontent.com'),
    ])
    expect(failed.error).toMatchObject({ truncated: true, message: expect.stringContaining(cut) })
    // warcinfo, six pages and the feed were whole; the cut is in the automobilwoche.de page
    expect(String((failed.error as Error).message)).toContain('after 8 complete records')
    expect(String((failed.error as Error).message)).toContain("onTruncated: 'stop'")
    const stopped = await drain(cut, { onTruncated: 'stop', emitSkipped: true })
    expect(stopped.error).toBeUndefined()
    expect(stopped.counters.truncatedFiles).toBe(1)
    expect(stopped.out).toHaveLength(7)
    expect(stopped.out[6]).toMatchObject({ skipped: 'truncated', file: cut })
  })

  test('an uncompressed .warc cut inside a record is truncated too, not a short page', async () => {
    const dir = tempDir()
    const cut = join(dir, 'cut.warc')
    writeFileSync(cut, readFileSync(fixture('example-iana.org-chunked.warc')).subarray(0, 3000))
    const { out, error } = await drain(cut)
    expect(out).toEqual([])
    expect(error).toMatchObject({ code: 'CORRUPT_WARC', truncated: true })
    expect((error as Error).message).toMatch(/cut\.warc: the record at byte 405 ends before its Content-Length/)
  })

  test('corrupt records are skipped and counted with file and offset; the records after them are read', async () => {
    const dir = tempDir()
    const warc = gunzipSync(readFileSync(fixture('real-pages.warc.gz'))).toString('latin1')
    const write = (name: string, text: string) => {
      writeFileSync(join(dir, name), Buffer.from(text, 'latin1'))
      return join(dir, name)
    }
    // the 2nd page's HTTP status line is not one (same length: the WARC framing stays intact)
    const second = warc.indexOf('HTTP/1.1 200 OK', warc.indexOf('HTTP/1.1 200 OK') + 1)
    const status = write('status.warc', `${warc.slice(0, second)}${'x'.repeat(15)}${warc.slice(second + 15)}`)
    const a = await drain(status, { emitSkipped: true })
    expect(a.error).toBeUndefined()
    expect(a.out.slice(0, 3)).toMatchObject([
      { url: 'https://kyffhaeuser-nachrichten.de/news/news_lang.php?ArtNr=335614' },
      {
        skipped: 'corrupt',
        file: status,
        offset: warc.lastIndexOf('WARC/1.0', second),
        url: 'http://hardsoft.at.webry.info/200802/article_1.html',
        message: expect.stringContaining('HTTP status line'),
      },
      { url: expect.stringContaining('www2.chuo-u.ac.jp') },
    ])
    expect(a.out).toHaveLength(7)
    expect(a.counters.skippedRecords).toBe(1)
    // the 1st page's version line is damaged: warcio loses that line and reads the next as headers
    const first = warc.indexOf('WARC/1.0', 1)
    const version = write('version.warc', `${warc.slice(0, first)}WORC${warc.slice(first + 4)}`)
    const b = await drain(version, { emitSkipped: true })
    expect(b.error).toBeUndefined()
    expect(b.out[0]).toMatchObject({ skipped: 'corrupt', file: version, offset: first })
    expect((b.out[0] as WarcSkip).message).toContain('WARC/ version line')
    expect(b.out.filter((r) => 'html' in r).map((r) => host((r as WarcPage).url))).toContain('www.automobilwoche.de')
    expect(b.counters.skippedRecords).toBe(b.out.filter((r) => 'skipped' in r).length)
  })

  test('a record over maxRecordBytes is skipped and counted, not held', async () => {
    const { out, counters } = await drain(fixture('real-pages.warc.gz'), { maxRecordBytes: 20_000, emitSkipped: true })
    // 29,606, 45,871 and 58,949 bytes are over; 4,420, 1,030, 1,126 and 12,504 are not
    expect(out.map((r) => ('skipped' in r ? r.skipped : 'page'))).toEqual([
      'tooLarge',
      'tooLarge',
      'page',
      'page',
      'page',
      'page',
      'tooLarge',
    ])
    expect(counters.skippedRecords).toBe(3)
  })
})

describe('decodeHtml', () => {
  test('an unknown label falls back to UTF-8 with replacement; no label reads the meta tag', () => {
    expect(decodeHtml(Buffer.from('caf\xe9 ok', 'latin1'), 'x-no-such-charset')).toEqual({ text: 'caf\uFFFD ok' })
    expect(decodeHtml(Buffer.from('<meta charset="iso-8859-1">caf\xe9 \x80', 'latin1')).text).toContain('café €')
  })

  test('UTF-16: a byte order mark or the HTTP header is obeyed, a <meta> naming it is read as UTF-8', () => {
    const plane1 = readFileSync(page('plane1-utf-16le.html')) // no BOM; its <meta> says UTF-16
    const title = '<title>Unicode Plane 1 Example Using UTF-16</title>'
    expect(decodeHtml(plane1, 'utf-16le').text).toContain(title)
    expect(decodeHtml(Buffer.concat([Buffer.from([0xff, 0xfe]), plane1])).text).toContain(title)
    // a BOM wins over the header
    expect(decodeHtml(Buffer.concat([Buffer.from([0xff, 0xfe]), plane1]), 'windows-1252').charset).toBe('utf-16le')
    expect(decodeHtml(Buffer.from('<meta charset="utf-16">caf\xc3\xa9', 'latin1'))).toEqual({
      text: '<meta charset="utf-16">café',
      charset: 'utf-8',
    })
  })
})

describe('Dataset.loadWarc', () => {
  test('runs in a pipeline and counts skipped records', async () => {
    const ds = Dataset.fromFiles(fixture('{example,real-pages}.warc.gz'))
      .loadWarc({ maxRecordBytes: 20_000 })
      .map((p) => host(p.url))
    const { results, counters } = await ctx.execute(ds)
    expect([...results].sort()).toEqual(['example.com', ...Array(4).fill('raw.githubusercontent.com')])
    expect(counters[0]!.skippedRecords).toBe(3)
  })

  test('bad options are plan errors', () => {
    expect(() => Dataset.fromFiles('x.warc').loadWarc({ maxRecordBytes: -1 })).toThrow(/maxRecordBytes/)
    expect(() => Dataset.fromFiles('x.warc').loadWarc({ onTruncated: 'skip' as 'stop' })).toThrow(/onTruncated/)
  })
})
