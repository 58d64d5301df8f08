/** @module The record every datakit dataset holds, its content-hash id and the text normalization applied at ingest. */
import { createHash } from 'node:crypto'

/** One document: `id` is the content hash of `text`; `meta` is a JSON object as text. */
export type DatakitRecord = {
  readonly id: string
  readonly text: string
  readonly source: string
  readonly meta: string
}

/** How ingest cleans text before hashing it. Part of the version's config: changing it makes a new version. */
export type NormalizeConfig = {
  /** Unicode NFC. @default true */
  readonly nfc?: boolean
  /** Trim leading and trailing whitespace. @default true */
  readonly trim?: boolean
  /** Turn every run of whitespace into one space. @default false */
  readonly collapseWhitespace?: boolean
  /** Drop documents with fewer characters than this after cleaning. @default 1 */
  readonly minChars?: number
}

/** Every option spelled out, so equal configs hash equally. */
export function resolveNormalize(n: NormalizeConfig = {}): Required<NormalizeConfig> {
  return {
    nfc: n.nfc ?? true,
    trim: n.trim ?? true,
    collapseWhitespace: n.collapseWhitespace ?? false,
    minChars: n.minChars ?? 1,
  }
}

/** The cleaned text, or `undefined` when the document is dropped. */
export function normalizeDocument(text: string, n: Required<NormalizeConfig>): string | undefined {
  let t = n.nfc ? text.normalize('NFC') : text
  if (n.collapseWhitespace) t = t.replace(/\s+/g, ' ')
  if (n.trim) t = t.trim()
  return t.length >= n.minChars ? t : undefined
}

/** Stable document id: the first 128 bits of the SHA-256 of its UTF-8 text, in hex. */
export function contentId(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex').slice(0, 32)
}
