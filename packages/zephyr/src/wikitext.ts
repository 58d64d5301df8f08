/**
 * @module Wikitext → plain text: what a reader of the rendered article sees,
 * minus the apparatus. Templates, references, tables, files, categories, HTML
 * comments and formatting go; links keep their label; headings and list items
 * keep their words.
 *
 * This is a scanner, not a MediaWiki parser: templates are dropped rather than
 * expanded, which is what text corpora want (infoboxes and citation templates
 * are not prose).
 */

/** Tags whose content is not prose and is dropped along with the tag. */
const DROP_CONTENT = [
  'ref',
  'math',
  'gallery',
  'timeline',
  'score',
  'syntaxhighlight',
  'source',
  'graph',
  'mapframe',
  'imagemap',
  'chem',
  'ce',
  'hiero',
]

/**
 * A wiki's namespace names by namespace number, as its dump's `<siteinfo>`
 * lists them (plus any aliases): `{ 6: ['Tập tin'], 14: ['Thể loại'] }`.
 * Links into Media (-2), File (6) and Category (14) are not prose.
 */
export type WikiNamespaceNames = Readonly<Record<number, readonly string[]>>

export type WikitextOptions = {
  /** The wiki's own namespace names; the canonical English ones are always known. @default English, German,
   * French and Spanish names */
  readonly namespaces?: WikiNamespaceNames
}

/** Namespaces whose links are dropped whole (captions and options included). */
const DROPPED_NAMESPACES = [-2, 6, 14]
/** The canonical names MediaWiki accepts on every wiki, with the `Image` alias of File. */
const CANONICAL: WikiNamespaceNames = { [-2]: ['Media'], 6: ['File', 'Image'], 14: ['Category'] }
/** Used when no namespace names are given (text from an unknown wiki). */
const COMMON: WikiNamespaceNames = {
  [-2]: ['Medium', 'Média', 'Medio'],
  6: ['Datei', 'Bild', 'Fichier', 'Archivo', 'Imagen'],
  14: ['Kategorie', 'Catégorie', 'Categoría'],
}
/** A link whose target is a media file is a file link under any namespace alias: `[[Hình:x.jpg|…]]`. */
const MEDIA_EXTENSIONS = 'jpe?g|png|gif|svg|tiff?|webp|bmp|ogg|ogv|oga|opus|webm|mp3|mp4|wav|flac|mid|pdf|djvu|stl'
const MEDIA_FILE = new RegExp(`^\\s*[^:|[\\]]+:[^|[\\]]*\\.(${MEDIA_EXTENSIONS})\\s*(\\||$)`, 'i')

function dropLinkPattern(names: WikiNamespaceNames): RegExp {
  const all = new Set<string>()
  for (const table of [CANONICAL, names])
    for (const ns of DROPPED_NAMESPACES) for (const n of table[ns] ?? []) if (n.trim()) all.add(n.trim())
  // spaces and underscores are the same in a title; the namespace is case-insensitive
  const alts = [...all].map((n) => n.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/[ _]+/g, '[ _]+'))
  return new RegExp(`^\\s*(${alts.join('|')})\\s*:`, 'iu')
}

const DEFAULT_DROP_LINK = dropLinkPattern(COMMON)
const dropLinkCache = new WeakMap<WikiNamespaceNames, RegExp>()

function dropLinkFor(names: WikiNamespaceNames | undefined): RegExp {
  if (names === undefined) return DEFAULT_DROP_LINK
  let re = dropLinkCache.get(names)
  if (re === undefined) dropLinkCache.set(names, (re = dropLinkPattern(names)))
  return re
}

/** Interlanguage links: `[[de:Artikel]]`. */
const INTERWIKI = /^\s*[a-z]{2,3}(-[a-z]+)?\s*:/

const ENTITIES: Record<string, string> = {
  nbsp: ' ',
  amp: '&',
  lt: '<',
  gt: '>',
  quot: '"',
  apos: "'",
  ndash: '–',
  mdash: '—',
  hellip: '…',
  laquo: '«',
  raquo: '»',
  lsquo: '‘',
  rsquo: '’',
  ldquo: '“',
  rdquo: '”',
  minus: '−',
  times: '×',
  deg: '°',
  middot: '·',
  thinsp: ' ',
  ensp: ' ',
  emsp: ' ',
  shy: '',
  zwj: '',
  zwnj: '',
}

export function decodeEntities(s: string): string {
  return s.replace(/&(#x[0-9a-f]+|#\d+|[a-z]+);/gi, (m, e: string) => {
    if (e[0] === '#') {
      const cp = e[1] === 'x' || e[1] === 'X' ? parseInt(e.slice(2), 16) : parseInt(e.slice(1), 10)
      return Number.isFinite(cp) && cp > 0 && cp <= 0x10ffff ? String.fromCodePoint(cp) : m
    }
    return ENTITIES[e.toLowerCase()] ?? m
  })
}

/** Removes balanced `open … close` spans (nested), e.g. `{{ … }}`; an unclosed span runs to the end. */
function removeNested(s: string, open: string, close: string): string {
  let out = ''
  let depth = 0
  let i = 0
  let last = 0
  while (i < s.length) {
    if (s.startsWith(open, i)) {
      if (depth === 0) out += s.slice(last, i)
      depth++
      i += open.length
    } else if (depth > 0 && s.startsWith(close, i)) {
      depth--
      i += close.length
      if (depth === 0) last = i
    } else i++
  }
  if (depth === 0) out += s.slice(last)
  return out
}

/** Removes `{| … |}` tables, which open and close at line starts (or indented, `:{|`) and nest. */
function removeTables(s: string): string {
  const out: string[] = []
  let depth = 0
  for (const line of s.split('\n')) {
    const t = line.replace(/^[\s:]+/, '')
    if (t.startsWith('{|')) depth++
    else if (depth > 0 && t.startsWith('|}')) {
      depth--
      continue
    }
    if (depth === 0) out.push(line)
  }
  return out.join('\n')
}

/** Replaces `[[…]]` links with their label; drops file, category and interlanguage links (captions included). */
function replaceLinks(s: string, dropLink: RegExp): string {
  let out = ''
  let i = 0
  while (i < s.length) {
    const start = s.indexOf('[[', i)
    if (start < 0) break
    out += s.slice(i, start)
    // find the matching ]] (links nest inside file captions)
    let depth = 0
    let j = start
    for (; j < s.length - 1; j++) {
      if (s[j] === '[' && s[j + 1] === '[') {
        depth++
        j++
      } else if (s[j] === ']' && s[j + 1] === ']') {
        depth--
        j++
        if (depth === 0) break
      }
    }
    if (depth !== 0) {
      out += s.slice(start)
      return out
    }
    const inner = s.slice(start + 2, j - 1)
    i = j + 1
    if (dropLink.test(inner) || MEDIA_FILE.test(inner) || (INTERWIKI.test(inner) && !inner.includes('|'))) continue
    const bar = inner.indexOf('|')
    let label = bar < 0 ? inner : inner.slice(bar + 1)
    if (bar >= 0 && label === '') label = inner.slice(0, bar).replace(/\s*\(.*\)\s*$/, '') // pipe trick
    out += replaceLinks(label.replace(/^:/, ''), dropLink)
  }
  return out + s.slice(i)
}

/**
 * Plain text of a wikitext document.
 * @example wikitextToText("'''Rome''' is the capital of [[Italy|Italia]].{{cite web|url=x}}") // "Rome is the capital
 * of Italia."
 */
export function wikitextToText(wikitext: string, options: WikitextOptions = {}): string {
  let s = wikitext.replace(/\r\n?/g, '\n')
  s = s.replace(/<!--[\s\S]*?(-->|$)/g, '')
  s = s.replace(/<nowiki>([\s\S]*?)<\/nowiki>/gi, (_m, t: string) =>
    t.replace(/[[\]{}'|]/g, (c) => `&#${c.charCodeAt(0)};`),
  )
  for (const tag of DROP_CONTENT) {
    s = s.replace(new RegExp(`<${tag}\\b[^>]*/>`, 'gi'), '')
    s = s.replace(new RegExp(`<${tag}\\b[^>]*>[\\s\\S]*?</${tag}\\s*>`, 'gi'), '')
  }
  s = s.replace(/<references\b[^>]*\/?>/gi, '')
  s = removeNested(s, '{{', '}}')
  s = removeTables(s)
  s = replaceLinks(s, dropLinkFor(options.namespaces))
  // external links: [http://x label] → label, bare bracketed URL → nothing
  s = s.replace(/\[(?:https?:|ftp:)?\/\/[^\s\]]+(?:\s+([^\]]*))?\]/gi, (_m, label?: string) => label ?? '')
  s = s.replace(/'{2,5}/g, '')
  s = s.replace(/<br\s*\/?>/gi, '\n')
  s = s.replace(/<\/?[a-z][a-z0-9]*\b[^>]*>/gi, '')
  s = s.replace(/__[A-Z]+__/g, '')
  const lines: string[] = []
  for (let line of s.split('\n')) {
    line = line.replace(/^\s*(={1,6})\s*(.*?)\s*\1\s*$/, '$2')
    line = line.replace(/^[*#:;]+\s*/, '')
    if (/^-{4,}\s*$/.test(line)) line = ''
    lines.push(line.replace(/[ \t]+/g, ' ').trim())
  }
  return decodeEntities(lines.join('\n'))
    .replace(/ +([,.;:!?)])/g, '$1')
    .replace(/\( +/g, '(')
    .replace(/\(\s*\)/g, '')
    .replace(/ {2,}/g, ' ')
    .replace(/\n{3,}/g, '\n\n')
    .trim()
}
