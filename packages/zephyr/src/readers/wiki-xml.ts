/**
 * @module MediaWiki XML export reader (`pages-articles.xml[.gz|.bz2]`), streaming.
 *
 * The dump is parsed with saxes as bytes arrive, so a multi-gigabyte dump
 * never sits in memory; each `<page>` becomes `{ id, title, text }` with its
 * latest revision's wikitext reduced to plain text.
 */
import { SaxesParser } from 'saxes'
import type { TaskCounters } from '../counters.js'
import { ZephyrError } from '../errors.js'
import { openInput } from '../internal/input.js'
import { wikitextToText } from '../wikitext.js'

export type WikiPage = { id: number; title: string; text: string }

export type WikiXmlOptions = {
  /** Keep only pages in these namespaces (0 = articles). @default all */
  readonly namespaces?: readonly number[]
  /** Drop `#REDIRECT` pages. @default true */
  readonly skipRedirects?: boolean
  /** Keep the raw wikitext instead of plain text. @default false */
  readonly raw?: boolean
}

const FIELDS = new Set(['title', 'ns', 'id', 'text'])

export async function* readWikiXml(
  url: string,
  opts: WikiXmlOptions = {},
  counters?: TaskCounters,
): AsyncGenerator<WikiPage[]> {
  const skipRedirects = opts.skipRedirects ?? true
  const namespaces = opts.namespaces ? new Set(opts.namespaces) : undefined
  const parser = new SaxesParser({ fileName: url })
  const stack: string[] = []
  let ready: WikiPage[] = []
  let page: { title: string; ns: string; id: string; text: string; redirect: boolean; revisions: number } | undefined
  let field: 'title' | 'ns' | 'id' | 'text' | undefined
  let buf = ''

  parser.on('opentag', (tag) => {
    const parent = stack[stack.length - 1]
    stack.push(tag.name)
    if (tag.name === 'page') page = { title: '', ns: '0', id: '', text: '', redirect: false, revisions: 0 }
    else if (page && tag.name === 'redirect' && parent === 'page') page.redirect = true
    else if (page && tag.name === 'revision' && parent === 'page') page.revisions++
    else if (page && FIELDS.has(tag.name)) {
      // page-level title/ns/id, and the text of a revision (the last one wins: exports list oldest first)
      const pageLevel = parent === 'page' && tag.name !== 'text'
      const revisionText = parent === 'revision' && tag.name === 'text'
      if (pageLevel || revisionText) {
        field = tag.name as typeof field
        buf = ''
      }
    }
  })
  parser.on('text', (t) => {
    if (field) buf += t
  })
  parser.on('cdata', (t) => {
    if (field) buf += t
  })
  parser.on('closetag', (tag) => {
    stack.pop()
    if (page && field === tag.name) {
      page[field] = buf
      field = undefined
    }
    if (tag.name === 'page' && page) {
      const ns = Number(page.ns)
      const keep = (!skipRedirects || !page.redirect) && (!namespaces || namespaces.has(ns))
      if (keep)
        ready.push({ id: Number(page.id), title: page.title, text: opts.raw ? page.text : wikitextToText(page.text) })
      page = undefined
    }
  })

  const input = await openInput(url, counters)
  input.setEncoding('utf8')
  try {
    for await (const chunk of input as AsyncIterable<string>) {
      parser.write(chunk)
      if (ready.length >= 64) {
        yield ready
        ready = []
      }
    }
    parser.close()
  } catch (err) {
    if (err instanceof ZephyrError) throw err
    if (/^\S+:\d+:\d+: /.test((err as Error).message) || (err as Error).message.includes(url)) {
      throw new ZephyrError(
        'CORRUPT_XML',
        `${(err as Error).message}; the dump is not well-formed XML (truncated download?)`,
        false,
        { cause: err },
      )
    }
    throw err
  }
  if (ready.length) yield ready
}
