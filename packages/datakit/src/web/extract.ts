/**
 * @module Main text of an HTML page: @mozilla/readability over linkedom.
 *
 * Readability is the algorithm behind Firefox's reader view, maintained by Mozilla and used on
 * the open web every day, so it is tuned on real pages rather than on a benchmark; linkedom is
 * a fast, standards-shaped DOM in plain JavaScript (no native parts, no jsdom weight), which is
 * all Readability needs. Readability's `textContent` runs a heading into the paragraph after it,
 * so the text is taken from its cleaned `content` HTML instead: block elements (headings,
 * paragraphs, list items, `pre`, `blockquote`, table rows, a `div` holding text) become lines,
 * paragraphs are separated by blank lines, and `<br>` is a line break.
 *
 * A page with no main text (navigation only, an empty shell) gives `noMainText`, never an empty
 * document; HTML over `maxHtmlBytes` is not parsed at all (`tooLarge`); main text of which more than
 * `maxReplacementFraction` is U+FFFD is `undecodable` (a page decoded with the wrong charset, or bytes
 * that are not text): its words are lost, and it is skipped rather than kept as noise. The caller
 * counts each.
 */
import { createRequire } from 'node:module'
import type * as ReadabilityModule from '@mozilla/readability'
import type * as Linkedom from 'linkedom'

type Readability = ReadabilityModule.Readability
type HtmlParser = {
  readonly parseHTML: typeof Linkedom.parseHTML
  readonly Readability: typeof ReadabilityModule.Readability
}

// linkedom and Readability (some 200 modules) load at first use, not with the package: most processes that
// import datakit parse no HTML. Async callers load them as ES modules first (loadHtmlParser); a direct
// synchronous call requires them (linkedom's CommonJS build of the same version)
let parser: HtmlParser | undefined

/** Loads linkedom and Readability for extractMainText, once per process. */
export async function loadHtmlParser(): Promise<void> {
  if (parser) return
  const [linkedom, readability] = await Promise.all([import('linkedom'), import('@mozilla/readability')])
  parser ??= { parseHTML: linkedom.parseHTML, Readability: readability.Readability }
}

function htmlParser(): HtmlParser {
  if (!parser) {
    const require = createRequire(import.meta.url)
    const linkedom = require('linkedom') as typeof Linkedom
    const readability = require('@mozilla/readability') as typeof ReadabilityModule
    parser = { parseHTML: linkedom.parseHTML, Readability: readability.Readability }
  }
  return parser
}

export type ExtractOptions = {
  /** HTML longer than this (UTF-16 code units, about bytes for markup) is skipped. @default 4 MiB */
  readonly maxHtmlBytes?: number
  /** Main text shorter than this many characters counts as none. @default 25 */
  readonly minChars?: number
  /** Main text with a larger share of U+FFFD (bytes the charset could not decode) is `undecodable`. @default 0.01 */
  readonly maxReplacementFraction?: number
}

export type Extracted = { readonly title: string; readonly text: string }

/** Why a page gave no document. */
export type ExtractMiss = 'tooLarge' | 'noMainText' | 'unparseable' | 'undecodable'

export const DEFAULT_MAX_HTML_BYTES = 4 * 2 ** 20
export const DEFAULT_MAX_REPLACEMENT_FRACTION = 0.01

const BLOCK = new Set([
  'ADDRESS',
  'ARTICLE',
  'ASIDE',
  'BLOCKQUOTE',
  'DD',
  'DIV',
  'DL',
  'DT',
  'FIGCAPTION',
  'FIGURE',
  'FOOTER',
  'H1',
  'H2',
  'H3',
  'H4',
  'H5',
  'H6',
  'HEADER',
  'HR',
  'LI',
  'MAIN',
  'OL',
  'P',
  'PRE',
  'SECTION',
  'TABLE',
  'TBODY',
  'THEAD',
  'TR',
  'UL',
])
/** Blocks that end a paragraph (blank line after); the other blocks end a line. */
const PARAGRAPH = new Set(['P', 'H1', 'H2', 'H3', 'H4', 'H5', 'H6', 'PRE', 'BLOCKQUOTE', 'TABLE', 'UL', 'OL', 'DL'])
const SKIP = new Set(['SCRIPT', 'STYLE', 'NOSCRIPT', 'TEMPLATE', 'SVG'])

const PRE_NL = '\uE000'

type Node = { nodeType: number; nodeName: string; textContent: string | null; childNodes: ArrayLike<Node> }

/** The page's main text and title, or why there is none. */
export function extractMainText(html: string, opts: ExtractOptions = {}): Extracted | ExtractMiss {
  if (html.length > (opts.maxHtmlBytes ?? DEFAULT_MAX_HTML_BYTES)) return 'tooLarge'
  const { parseHTML, Readability } = htmlParser()
  let article: ReturnType<Readability['parse']>
  try {
    const { document } = parseHTML(html)
    article = new Readability(document as unknown as ConstructorParameters<typeof Readability>[0]).parse()
  } catch {
    return 'unparseable'
  }
  if (!article?.content) return 'noMainText'
  const { document: content } = parseHTML(`<html><body>${article.content}</body></html>`)
  const text = blockText(content.body as unknown as Node)
  if (text.length < (opts.minChars ?? 25)) return 'noMainText'
  let replaced = 0
  for (let i = text.indexOf('\uFFFD'); i >= 0; i = text.indexOf('\uFFFD', i + 1)) replaced++
  if (replaced > text.length * (opts.maxReplacementFraction ?? DEFAULT_MAX_REPLACEMENT_FRACTION)) return 'undecodable'
  return { title: (article.title ?? '').trim(), text }
}

/** Text of a DOM subtree with block structure kept as line breaks and blank lines. */
export function blockText(root: Node): string {
  const out: string[] = []
  let line = ''
  // pending break after the last block: 0 none, 1 newline, 2 blank line
  let pending = 0
  const flush = (brk: number) => {
    const t = line.replace(/[ \t\f\r\n\u00a0]+/g, ' ').trim()
    if (t) {
      if (out.length) out.push(pending >= 2 ? '\n\n' : '\n')
      out.push(t)
      pending = 0
    }
    line = ''
    pending = Math.max(pending, brk)
  }
  const walk = (n: Node, pre: boolean) => {
    if (n.nodeType === 3) {
      line += pre ? (n.textContent ?? '').replace(/\n/g, PRE_NL) : (n.textContent ?? '')
      return
    }
    if (n.nodeType !== 1) return
    const tag = n.nodeName.toUpperCase()
    if (SKIP.has(tag)) return
    if (tag === 'BR') {
      flush(1)
      return
    }
    const block = BLOCK.has(tag)
    if (block) flush(1)
    const kids = n.childNodes
    for (let i = 0; i < kids.length; i++) walk(kids[i]!, pre || tag === 'PRE')
    if (block) flush(PARAGRAPH.has(tag) ? 2 : 1)
  }
  walk(root, false)
  flush(0)
  // a <pre>'s own line breaks survive the whitespace folding as a private-use character
  return out.join('').replaceAll(PRE_NL, '\n')
}
