import { readFileSync } from 'node:fs'
import { gzipSync } from 'node:zlib'
import { copyFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, test } from 'vitest'
import { Dataset } from './dataset.js'
import { ZephyrContext } from './context.js'
import type { WikiPage } from './readers/wiki-xml.js'
import { tempDir } from './fixtures/tmp.js'
import { decodeEntities, wikitextToText } from './wikitext.js'

const sample = new URL('./fixtures/wiki-sample.xml', import.meta.url)
const ctx = new ZephyrContext({ inProcess: true, progress: 'off' })

describe('wikitextToText', () => {
  test('links keep their label, templates and refs go', () => {
    expect(
      wikitextToText(
        "'''Rome''' is the capital of [[Italy|Italia]].<ref>{{cite " +
          'web|url=x}}</ref> It has [[river]]s.{{citation needed}}',
      ),
    ).toBe('Rome is the capital of Italia. It has rivers.')
  })
  test('nested templates and tables are removed, headings and list items kept', () => {
    const t = wikitextToText(
      '{{Infobox|a={{b|{{c}}}}}}\nIntro.\n== Title ==\n{|\n| a || b\n{|\n|nested\n|}\n|}\n* item one\n# item two',
    )
    expect(t).toBe('Intro.\nTitle\nitem one\nitem two')
  })
  test('file and category links go, with their captions', () => {
    expect(wikitextToText('A [[File:x.jpg|thumb|A [[b]] c]] B [[Category:Z]] [[:Category:Shown]]')).toBe(
      'A B Category:Shown',
    )
  })
  test('external links keep their label; comments and formatting vanish', () => {
    expect(wikitextToText("See [https://x.org the site] <!-- hidden --> and ''em'' " + '[https://bare.org].')).toBe(
      'See the site and em.',
    )
  })
  test('entities decode once', () => {
    expect(decodeEntities('a&nbsp;b &amp;lt; &#233; &#x41;')).toBe('a b &lt; é A')
  })
})

function expectLyon(pages: WikiPage[]) {
  const titles = pages.map((p) => p.title)
  expect(titles).toEqual(['Lyon', 'Rhône'])
  const lyon = pages[0]!
  expect(lyon.id).toBe(1234)
  expect(lyon.text).toBe(
    [
      'Lyon is the third-largest city of France. It lies at the confluence of the Rhône and Saône rivers.',
      '',
      'History',
      'The city was founded as Lugdunum by the Romans in 43 BC.',
      '',
      'Population',
      'Silk weaving made the city rich.',
      'See the city website for more.',
      '',
      'References',
    ].join('\n'),
  )
  expect(pages[1]!.text).toBe(
    'The Rhône is a major river of Europe, rising in the Alps.\nIt flows through Lake Geneva & Lyon.',
  )
  for (const p of pages) expect(p.text).not.toMatch(/\{\{|\}\}|\[\[|\]\]|<ref|\|-|'''|Category/)
}

describe('loadWikiXml', () => {
  test('a MediaWiki export: articles only, redirects dropped, markup reduced to text', async () => {
    const dir = tempDir()
    copyFileSync(sample, join(dir, 'dump.xml'))
    const { results } = await ctx.execute(Dataset.fromFiles(join(dir, 'dump.xml')).loadWikiXml({ namespaces: [0] }))
    expectLyon(results)
  })

  test('.gz and .bz2 dumps stream the same pages', async () => {
    const dir = tempDir()
    writeFileSync(join(dir, 'dump.xml.gz'), gzipSync(readFileSync(sample)))
    copyFileSync(new URL('./fixtures/wiki-sample.xml.bz2', import.meta.url), join(dir, 'dump.xml.bz2'))
    for (const f of ['dump.xml.gz', 'dump.xml.bz2']) {
      const { results } = await ctx.execute(Dataset.fromFiles(join(dir, f)).loadWikiXml({ namespaces: [0] }))
      expectLyon(results)
    }
  })

  test('all namespaces and redirects on request; raw keeps wikitext', async () => {
    const dir = tempDir()
    copyFileSync(sample, join(dir, 'dump.xml'))
    const { results } = await ctx.execute(
      Dataset.fromFiles(join(dir, 'dump.xml')).loadWikiXml({ skipRedirects: false, raw: true }),
    )
    expect(results.map((p) => p.title)).toEqual(['Lyon', 'Lugdunum', 'Talk:Lyon', 'Rhône'])
    expect(results[1]!.text).toBe('#REDIRECT [[Lyon]]')
  })

  test('a truncated dump is a CORRUPT_XML error naming the file', async () => {
    const dir = tempDir()
    const text = readFileSync(sample, 'utf8')
    writeFileSync(join(dir, 'cut.xml'), text.slice(0, text.length / 2))
    await expect(ctx.execute(Dataset.fromFiles(join(dir, 'cut.xml')).loadWikiXml())).rejects.toMatchObject({
      code: 'CORRUPT_XML',
      message: expect.stringContaining('cut.xml'),
    })
  })
})
