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
  test("a wiki's own namespace names drop its file, media and category links, with their options", () => {
    const namespaces = { [-2]: ['Phương tiện'], 6: ['Tập tin'], 14: ['Thể loại'] }
    expect(
      wikitextToText(
        'A [[Tập tin:x.jpg|nhỏ|trái|250px|B [[c]]]] C [[Thể_loại:Z]] [[thể loại:Y| ]] ' +
          '[[Phương tiện:a.ogg|nghe]] [[Category:English]] [[:Thể loại:Shown|shown]]',
        { namespaces },
      ),
    ).toBe('A C shown')
  })
  test('a link to a media file goes whatever its namespace prefix', () => {
    expect(wikitextToText('[[Hình:Máy chủ.jpg|phải|200px|Một máy chủ]] ok [[Plik:Mapa.svg]]')).toBe('ok')
  })
  test('tables indented with a colon go, rows and all', () => {
    expect(wikitextToText('Before.\n:{| class="wikitable"\n|-\n! Năm !! Người\n|-\n| 2000 || 361\n|}\nAfter.')).toBe(
      'Before.\nAfter.',
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

describe('a Vietnamese dump', () => {
  const vi = new URL('./fixtures/viwiki-sample.xml', import.meta.url)
  const internet = [
    'Internet là một hệ thống mạng toàn cầu.',
    '',
    'Lịch sử',
    'Mạng ARPANET ra đời năm 1969.',
    '',
    'Số người dùng tăng rất nhanh.',
  ].join('\n')
  const hanoi =
    'Hà Nội là thủ đô của Việt Nam, một trong các thủ đô châu Á.\nDiện tích: 3.359 km²\nSông chính: sông Hồng'

  test("namespaces come from the dump's siteinfo: no category, file option or table row is left", async () => {
    const dir = tempDir()
    copyFileSync(vi, join(dir, 'viwiki.xml'))
    const { results } = await ctx.execute(Dataset.fromFiles(join(dir, 'viwiki.xml')).loadWikiXml({ namespaces: [0] }))
    expect(results.map((p) => p.title)).toEqual(['Internet', 'Hà Nội'])
    expect(results.map((p) => p.text)).toEqual([internet, hanoi])
    for (const p of results) expect(p.text).not.toMatch(/Thể loại|Tập tin|nhỏ|px|\|-|!!|\[\[|\]\]|\{\||Category/)
  })

  test('the category page is in namespace 14 and its own category link goes', async () => {
    const dir = tempDir()
    copyFileSync(vi, join(dir, 'viwiki.xml'))
    const { results } = await ctx.execute(Dataset.fromFiles(join(dir, 'viwiki.xml')).loadWikiXml({ namespaces: [14] }))
    expect(results).toEqual([{ id: 503, title: 'Thể loại:Internet', text: 'Các bài về Internet.' }])
  })
})

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
