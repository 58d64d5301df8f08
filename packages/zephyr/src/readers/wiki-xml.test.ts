import { copyFileSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, test } from 'vitest'
import { ZephyrContext } from '../context.js'
import { Dataset } from '../dataset.js'
import { manyPagesDump } from '../fixtures/wiki-dump.js'
import { tempDir } from '../fixtures/tmp.js'
import { readWikiXml, type WikiPage, type WikiXmlOptions } from './wiki-xml.js'

const ctx = new ZephyrContext({ inProcess: true, progress: 'off' })
const manyBz2 = new URL('../fixtures/wiki-many.xml.bz2', import.meta.url)

/** Pages the reader delivers before it stops, and the error it stops with (if any). */
async function drain(url: string, opts?: WikiXmlOptions): Promise<{ pages: WikiPage[]; error?: unknown }> {
  const pages: WikiPage[] = []
  try {
    for await (const batch of readWikiXml(url, opts)) pages.push(...batch)
  } catch (error) {
    return { pages, error }
  }
  return { pages }
}

const titles = (n: number): string[] => Array.from({ length: n }, (_, i) => `Page ${i + 1}`)

/** A 20-page dump cut after the 10th page's `</page>` and part of the 11th. */
function cutAfterTenth(dir: string): string {
  const xml = manyPagesDump(20)
  let at = 0
  for (let i = 0; i < 10; i++) at = xml.indexOf('</page>', at) + '</page>'.length
  const path = join(dir, 'cut.xml')
  writeFileSync(path, xml.slice(0, at + 120))
  return path
}

/** The multi-block .bz2 fixture cut in half (Python's bz2 decodes 43 complete pages from these bytes). */
function halfBz2(dir: string): string {
  const bytes = readFileSync(manyBz2)
  const path = join(dir, 'half.xml.bz2')
  writeFileSync(path, bytes.subarray(0, bytes.length >> 1))
  return path
}

describe('truncated dumps', () => {
  test('the whole multi-block .bz2 fixture reads as its 120 generated pages', async () => {
    const dir = tempDir()
    copyFileSync(manyBz2, join(dir, 'many.xml.bz2'))
    const { pages, error } = await drain(join(dir, 'many.xml.bz2'))
    expect(error).toBeUndefined()
    expect(pages.map((p) => p.title)).toEqual(titles(120))
    expect(pages[0]!.text.startsWith('Page 1 is about the river.\n')).toBe(true)
  })

  test('an XML dump cut after its 10th page delivers those 10 pages, then CORRUPT_XML', async () => {
    const path = cutAfterTenth(tempDir())
    const { pages, error } = await drain(path)
    expect(pages.map((p) => p.title)).toEqual(titles(10))
    expect(error).toMatchObject({
      code: 'CORRUPT_XML',
      message: expect.stringMatching(/cut\.xml.*after 10 complete pages.*onTruncated: 'stop'/s),
    })
  })

  test("onTruncated: 'stop' keeps the complete pages of a cut XML dump and counts the file", async () => {
    const path = cutAfterTenth(tempDir())
    const { results, counters } = await ctx.execute(Dataset.fromFiles(path).loadWikiXml({ onTruncated: 'stop' }))
    expect(results.map((p) => p.title)).toEqual(titles(10))
    expect(counters[0]!.truncatedFiles).toBe(1)
  })

  test('a .bz2 cut in half delivers every page of its complete blocks, then a CORRUPT_COMPRESSED of ours', async () => {
    const path = halfBz2(tempDir())
    const { pages, error } = await drain(path)
    expect(pages.map((p) => p.title)).toEqual(titles(43))
    expect(error).toMatchObject({
      code: 'CORRUPT_COMPRESSED',
      message: expect.stringMatching(/half\.xml\.bz2.*ends inside a bzip2 block.*truncated/s),
    })
    expect((error as Error).message).not.toMatch(/TypeError|undefined/)
  })

  test("onTruncated: 'stop' keeps what a cut .bz2 decodes and counts the file", async () => {
    const path = halfBz2(tempDir())
    const { results, counters } = await ctx.execute(Dataset.fromFiles(path).loadWikiXml({ onTruncated: 'stop' }))
    expect(results.map((p) => p.title)).toEqual(titles(43))
    expect(counters[0]!.truncatedFiles).toBe(1)
  })

  test("malformed XML inside the file is an error even with onTruncated: 'stop'", async () => {
    const dir = tempDir()
    const xml = manyPagesDump(5).replace('<title>Page 3</title>', '<title>Page 3</titel>')
    writeFileSync(join(dir, 'bad.xml'), xml)
    const { pages, error } = await drain(join(dir, 'bad.xml'), { onTruncated: 'stop' })
    expect(pages.map((p) => p.title)).toEqual(titles(2))
    expect(error).toMatchObject({ code: 'CORRUPT_XML', message: expect.stringContaining('bad.xml') })
  })
})

describe('namespaces', () => {
  test('namespaceAliases adds names the siteinfo does not list', async () => {
    const dir = tempDir()
    const xml = manyPagesDump(1).replace('[[Category:Generated]]', '[[Kat:Generated]] [[Ảnh:Map|nhỏ|Map]]')
    writeFileSync(join(dir, 'one.xml'), xml)
    const plain = await drain(join(dir, 'one.xml'))
    expect(plain.pages[0]!.text).toMatch(/Kat:Generated/)
    const { pages } = await drain(join(dir, 'one.xml'), { namespaceAliases: { 14: ['Kat'], 6: ['Ảnh'] } })
    expect(pages[0]!.text).not.toMatch(/Kat|Generated|Map|nhỏ/)
  })
})
