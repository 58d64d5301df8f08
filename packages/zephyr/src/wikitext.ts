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

/** Link namespaces that are not links to prose (the whole link is dropped). */
const DROP_LINK = /^\s*(file|image|media|category|datei|bild|fichier|kategorie|catégorie|categoría|archivo|imagen)\s*:/i
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

/** Removes `{| … |}` tables, which open and close at line starts and nest. */
function removeTables(s: string): string {
  const out: string[] = []
  let depth = 0
  for (const line of s.split('\n')) {
    const t = line.trimStart()
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
function replaceLinks(s: string): string {
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
    if (DROP_LINK.test(inner) || (INTERWIKI.test(inner) && !inner.includes('|'))) continue
    const bar = inner.indexOf('|')
    let label = bar < 0 ? inner : inner.slice(bar + 1)
    if (bar >= 0 && label === '') label = inner.slice(0, bar).replace(/\s*\(.*\)\s*$/, '') // pipe trick
    out += replaceLinks(label.replace(/^:/, ''))
  }
  return out + s.slice(i)
}

/**
 * Plain text of a wikitext document.
 * @example wikitextToText("'''Rome''' is the capital of [[Italy|Italia]].{{cite web|url=x}}") // "Rome is the capital
 * of Italia."
 */
export function wikitextToText(wikitext: string): string {
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
  s = replaceLinks(s)
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
