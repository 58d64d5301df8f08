/** @module Small text helpers shared by the HTML and Markdown renderers. */

/** Escapes text for HTML and SVG element content and attribute values. */
export function escapeXml(s: string): string {
  return s
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;')
}

/**
 * Text as Markdown that renders as that text and nothing else: HTML's `<`, `>` and `&` as entities (no tag, no
 * `onerror=`, no entity trick) and Markdown's punctuation backslash-escaped (no link, image, emphasis or code),
 * on one line. Pipes are left to `escapeCell`, which a table applies to every cell.
 * @example escapeMarkdown('[x](javascript:alert(1))') // '\\[x\\]\\(javascript:alert\\(1\\)\\)'
 */
export function escapeMarkdown(s: string): string {
  return s
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/[\\`*_{}[\]()!~#]/g, '\\$&')
    .replace(/\r\n|[\r\n\u2028\u2029]/g, ' ')
}

/** Text as a Markdown code span when it holds nothing a renderer could read as markup, else as escaped text. */
export function codeSpan(s: string): string {
  return /^[A-Za-z0-9._@:/+=,~ -]+$/.test(s) ? `\`${s}\`` : escapeMarkdown(s)
}

/**
 * A Markdown link to `href` when it is one of the report's own relative links or an http(s) URL; any other
 * destination (`javascript:`, `data:`, `file:`, `/abs`, `//host`) gives the text alone. `text` is Markdown.
 */
export function markdownLink(text: string, href: string): string {
  const relative = !/^[a-z][a-z0-9+.-]*:/i.test(href) && !href.startsWith('/') && !href.startsWith('\\')
  if (!relative && !/^https?:\/\/[^/\\]/i.test(href)) return text
  const dest = href.replace(/[^A-Za-z0-9\-._~/!$&'*+,;=:@?#%]/g, (c) =>
    [...new TextEncoder().encode(c)].map((b) => `%${b.toString(16).toUpperCase().padStart(2, '0')}`).join(''),
  )
  return `[${text}](${dest})`
}

/** Markdown made a table cell: its pipes escaped (GFM reads `\\|` as a pipe, inside code spans too), on one line. */
export function escapeCell(s: string): string {
  return s.replace(/\|/g, '\\|').replace(/\r?\n/g, ' ')
}

/** `0.4 s`, `12.3 s`, `4 min 05 s`, `1 h 02 min`. */
export function formatSeconds(s: number): string {
  if (s < 60) return `${s < 10 ? s.toFixed(1) : Math.round(s)} s`
  if (s < 3600) return `${Math.floor(s / 60)} min ${String(Math.round(s % 60)).padStart(2, '0')} s`
  return `${Math.floor(s / 3600)} h ${String(Math.floor((s % 3600) / 60)).padStart(2, '0')} min`
}

/** Bytes with a binary unit. */
export function formatBytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB']
  let v = n
  let i = 0
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024
    i++
  }
  return `${i === 0 ? v : v.toFixed(1)} ${units[i]}`
}

/** A metric value with sensible precision. */
export function formatNumber(v: number): string {
  if (Number.isInteger(v)) return v.toLocaleString('en-US')
  const a = Math.abs(v)
  if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(3)
  return v.toPrecision(4)
}

/** A metadata value as short text. */
export function formatValue(v: unknown): string {
  if (typeof v === 'number') return formatNumber(v)
  if (typeof v === 'string') return v
  return JSON.stringify(v)
}
