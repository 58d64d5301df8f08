import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { gunzipSync } from 'node:zlib'
import { describe, expect, test } from 'vitest'
import { ZephyrContext } from '../context.js'
import { emptyTaskCounters } from '../counters.js'
import { Dataset } from '../dataset.js'
import { tempDir } from '../fixtures/tmp.js'
import { decodeHtml, readWarc, type WarcOptions, type WarcPage, type WarcSkip } from './warc.js'

const ctx = new ZephyrContext({ inProcess: true, progress: 'off' })
const fixture = (f: string) => new URL(`../../test-fixtures/warc/${f}`, import.meta.url).pathname

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

  test('windows-1252 from the HTTP header and Shift_JIS from the meta tag decode; PNG is left out', async () => {
    const { out } = await drain(fixture('written.warc.gz'))
    const [fr, ja, nav] = out as WarcPage[]
    expect(out).toHaveLength(3)
    expect(fr!.charset).toBe('windows-1252')
    // € ’ — are the bytes Node 20's own windows-1252 decoder gets wrong
    expect(fr!.html).toContain('Le « petit noir » coûte 1,20 € au comptoir — un prix qui n’a pas changé')
    expect(ja!.charset).toBe('shift_jis')
    expect(ja!.html).toContain('京都の秋は紅葉で有名です。')
    expect(nav!.url).toBe('http://portal.example.com/sitemap')
  })

  test('a .warc.gz cut inside its third member: whole records first, then CORRUPT_COMPRESSED or a count', async () => {
    const dir = tempDir()
    const bytes = readFileSync(fixture('written.warc.gz'))
    const cut = join(dir, 'cut.warc.gz')
    writeFileSync(cut, bytes.subarray(0, bytes.length - 700))
    const failed = await drain(cut)
    expect(failed.out.map((r) => (r as WarcPage).url)).toEqual([
      'http://cafe.example.fr/',
      'http://kyoto.example.jp/aki.html',
    ])
    expect(failed.error).toMatchObject({ truncated: true, message: expect.stringContaining('cut.warc.gz') })
    expect(String((failed.error as Error).message)).toContain("onTruncated: 'stop'")
    const stopped = await drain(cut, { onTruncated: 'stop', emitSkipped: true })
    expect(stopped.error).toBeUndefined()
    expect(stopped.counters.truncatedFiles).toBe(1)
    expect(stopped.out).toHaveLength(3)
    expect(stopped.out[2]).toMatchObject({ skipped: 'truncated', file: cut })
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
    const warc = gunzipSync(readFileSync(fixture('written.warc.gz'))).toString('latin1')
    const write = (name: string, text: string) => {
      writeFileSync(join(dir, name), Buffer.from(text, 'latin1'))
      return join(dir, name)
    }
    // the 2nd record's HTTP status line is not one (same length: the WARC framing stays intact)
    const second = warc.indexOf('HTTP/1.1 200 OK', warc.indexOf('HTTP/1.1 200 OK') + 1)
    const status = write('status.warc', `${warc.slice(0, second)}${'x'.repeat(15)}${warc.slice(second + 15)}`)
    const a = await drain(status, { emitSkipped: true })
    expect(a.error).toBeUndefined()
    expect(a.out).toMatchObject([
      { url: 'http://cafe.example.fr/' },
      { skipped: 'corrupt', file: status, offset: 1092, message: expect.stringContaining('HTTP status line') },
      { url: 'http://portal.example.com/sitemap' },
    ])
    expect(a.counters.skippedRecords).toBe(1)
    // the 1st record's version line is damaged: warcio loses that line and reads the next as headers
    const version = write('version.warc', warc.replace('WARC/1.0', 'WORC/1.0'))
    const b = await drain(version, { emitSkipped: true })
    expect(b.error).toBeUndefined()
    expect(b.out[0]).toMatchObject({ skipped: 'corrupt', file: version, offset: 0 })
    expect((b.out[0] as WarcSkip).message).toContain('WARC/ version line')
    expect(b.out.filter((r) => 'html' in r).map((r) => (r as WarcPage).url)).toContain(
      'http://portal.example.com/sitemap',
    )
    expect(b.counters.skippedRecords).toBe(b.out.filter((r) => 'skipped' in r).length)
  })

  test('a record over maxRecordBytes is skipped and counted, not held', async () => {
    const { out, counters } = await drain(fixture('written.warc.gz'), { maxRecordBytes: 550, emitSkipped: true })
    expect(out.map((r) => ('skipped' in r ? r.skipped : 'page'))).toEqual(['tooLarge', 'page', 'page'])
    expect(counters.skippedRecords).toBe(1)
  })
})

describe('decodeHtml', () => {
  test('an unknown label falls back to UTF-8 with replacement; no label reads the meta tag', () => {
    expect(decodeHtml(Buffer.from('caf\xe9 ok', 'latin1'), 'x-no-such-charset')).toEqual({ text: 'caf\uFFFD ok' })
    expect(decodeHtml(Buffer.from('<meta charset="iso-8859-1">caf\xe9 \x80', 'latin1')).text).toContain('café €')
  })
})

describe('Dataset.loadWarc', () => {
  test('runs in a pipeline and counts skipped records', async () => {
    const ds = Dataset.fromFiles(fixture('*.warc*'))
      .loadWarc({ maxRecordBytes: 550 })
      .map((p) => p.url)
    const { results, counters } = await ctx.execute(ds)
    expect([...results].sort()).toEqual(['http://kyoto.example.jp/aki.html', 'http://portal.example.com/sitemap'])
    expect(counters[0]!.skippedRecords).toBe(3)
  })

  test('bad options are plan errors', () => {
    expect(() => Dataset.fromFiles('x.warc').loadWarc({ maxRecordBytes: -1 })).toThrow(/maxRecordBytes/)
    expect(() => Dataset.fromFiles('x.warc').loadWarc({ onTruncated: 'skip' as 'stop' })).toThrow(/onTruncated/)
  })
})
