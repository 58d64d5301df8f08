/**
 * @module MediaWiki XML export reader (`pages-articles.xml[.gz|.bz2]`), streaming.
 *
 * The dump is parsed with saxes as bytes arrive, so a multi-gigabyte dump
 * never sits in memory; each `<page>` becomes `{ id, title, text }` with its
 * latest revision's wikitext reduced to plain text. The namespace names in
 * the dump's `<siteinfo>` (`Tập tin`, `Thể loại` on a Vietnamese wiki) tell
 * file and category links from prose links, in any language.
 */
import { SaxesParser } from 'saxes'
import type { TaskCounters } from '../counters.js'
import { ZephyrError } from '../errors.js'
import { openInput } from '../internal/input.js'
import { type WikiNamespaceNames, wikitextToText } from '../wikitext.js'

export type WikiPage = { id: number; title: string; text: string }

export type WikiXmlOptions = {
  /** Keep only pages in these namespaces (0 = articles). @default all */
  readonly namespaces?: readonly number[]
  /** Drop `#REDIRECT` pages. @default true */
  readonly skipRedirects?: boolean
  /** Keep the raw wikitext instead of plain text. @default false */
  readonly raw?: boolean
  /**
   * More names by namespace number, for aliases a dump's siteinfo does not
   * list (it lists each namespace's local name only), e.g. `{ 14: ['Kat'] }`.
   * Links to media files (`.jpg`, `.png`, `.ogg`, …) are dropped under any
   * prefix without this. @default none
   */
  readonly namespaceAliases?: WikiNamespaceNames
  /**
   * A dump that ends early (a cut download, or a compressed file whose last
   * block is incomplete): every complete page before the cut is delivered,
   * then `error` raises `CORRUPT_XML`/`CORRUPT_COMPRESSED` naming the file,
   * while `stop` ends the file quietly and counts it in `truncatedFiles`.
   * Malformed XML inside a file is an error either way. @default 'error'
   */
  readonly onTruncated?: 'error' | 'stop'
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
  let complete = 0
  // <siteinfo><namespaces><namespace key="6">Tập tin</namespace>: read before the first page
  const siteNames: Record<number, string[]> = {}
  for (const [k, names] of Object.entries(opts.namespaceAliases ?? {})) siteNames[Number(k)] = [...names]
  let nsKey: number | undefined
  const convert = { namespaces: siteNames as WikiNamespaceNames }

  parser.on('opentag', (tag) => {
    const parent = stack[stack.length - 1]
    stack.push(tag.name)
    if (tag.name === 'page') page = { title: '', ns: '0', id: '', text: '', redirect: false, revisions: 0 }
    else if (!page && tag.name === 'namespace' && parent === 'namespaces') {
      nsKey = Number(tag.attributes.key)
      buf = ''
    } else if (page && tag.name === 'redirect' && parent === 'page') page.redirect = true
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
    if (field || nsKey !== undefined) buf += t
  })
  parser.on('cdata', (t) => {
    if (field || nsKey !== undefined) buf += t
  })
  parser.on('closetag', (tag) => {
    stack.pop()
    if (nsKey !== undefined && tag.name === 'namespace') {
      if (Number.isInteger(nsKey) && buf.trim()) (siteNames[nsKey] ??= []).push(buf.trim())
      nsKey = undefined
    }
    if (page && field === tag.name) {
      page[field] = buf
      field = undefined
    }
    if (tag.name === 'page' && page) {
      complete++
      const ns = Number(page.ns)
      const keep = (!skipRedirects || !page.redirect) && (!namespaces || namespaces.has(ns))
      if (keep)
        ready.push({
          id: Number(page.id),
          title: page.title,
          text: opts.raw ? page.text : wikitextToText(page.text, convert),
        })
      page = undefined
    }
  })

  const input = await openInput(url, counters)
  input.setEncoding('utf8')
  let failure: unknown
  let truncated = false
  try {
    for await (const chunk of input as AsyncIterable<string>) {
      parser.write(chunk)
      if (ready.length >= 64) {
        yield ready
        ready = []
      }
    }
    truncated = true // an error from close() is a dump that ends before its last tag closes
    parser.close()
  } catch (err) {
    failure = err
    truncated = truncated || (err instanceof ZephyrError && err.truncated)
  }
  // pages completed before a failure are delivered first
  if (ready.length) yield ready
  if (failure === undefined) return
  if (truncated && opts.onTruncated === 'stop') {
    if (counters) counters.truncatedFiles++
    return
  }
  const after = `after ${complete} complete pages`
  const hint = truncated ? `; load with { onTruncated: 'stop' } to keep the complete pages without an error` : ''
  const err = failure as Error
  if (err instanceof ZephyrError)
    throw new ZephyrError(err.code, `${err.message} (${after}${hint})`, err.retryable, {
      cause: err.cause,
      truncated: err.truncated,
    })
  if (/^\S+:\d+:\d+: /.test(err.message) || err.message.includes(url)) {
    throw new ZephyrError(
      'CORRUPT_XML',
      `${err.message}; the dump is not well-formed XML ${after} ` +
        `(${truncated ? 'truncated download?' : 'a damaged file?'})${hint}`,
      false,
      { cause: err, truncated },
    )
  }
  throw err
}
