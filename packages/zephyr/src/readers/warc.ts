/**
 * @module WARC reader (`.warc`, `.warc.gz`), streaming, record by record.
 *
 * The file's bytes (gunzipped by zephyr's native zlib when the name ends in `.gz`: a `.warc.gz`
 * is a chain of gzip members, which zlib reads as one stream) go through warcio's `WARCParser`
 * (webrecorder's WARC library, the JS sibling of Python's warcio) as they arrive, so a file of any
 * size costs one record's payload in memory, and that payload is capped: a record whose decoded
 * payload exceeds `maxRecordBytes` is drained without being kept, then skipped and counted.
 *
 * Each kept record is plain data: `{ url, date, recordId, contentType, httpStatus, charset?,
 * html, offset }`, its HTTP body decoded with warcio (chunked transfer and gzip/deflate/br
 * content encodings) and then to text by its byte order mark, the charset of the HTTP header or,
 * failing those, of the page's own `<meta>` tag or XML declaration; an unknown label or none
 * decodes as UTF-8 with U+FFFD for bad bytes.
 *
 * Nothing is dropped silently: a record that cannot be read (not a WARC record, an HTTP
 * response without a status line, a body whose content encoding does not decode) or that is too
 * large is counted in `skippedRecords` and logged with the file, its byte offset and the reason;
 * with `emitSkipped` each also arrives in the stream as a `WarcSkip`, so a step can keep them.
 * Offsets count bytes of the WARC stream itself, i.e. after gunzip for a `.warc.gz`.
 */
import { logger } from '@marin/rigging'
import { WARCParser, type WARCRecord } from 'warcio'
import type { TaskCounters } from '../counters.js'
import { ZephyrError } from '../errors.js'
import { openInput } from '../internal/input.js'

const log = logger('zephyr')

/** One WARC record with an HTML (or, if asked, other) payload, as text. */
export type WarcPage = {
  /** `WARC-Target-URI`. */
  readonly url: string
  /** `WARC-Date` (ISO 8601, as written). */
  readonly date: string
  /** `WARC-Record-ID`, e.g. `<urn:uuid:…>`. */
  readonly recordId: string
  /** The payload's media type from the HTTP `Content-Type` (lower case, no parameters), e.g. `text/html`. */
  readonly contentType: string
  /** The HTTP status code; absent for records without HTTP headers (`resource`). */
  readonly httpStatus?: number
  /** The charset the payload was decoded with (WHATWG name, e.g. `windows-1252`), when one was declared. */
  readonly charset?: string
  /** The payload decoded to text. */
  readonly html: string
  /** Byte offset of the record in the WARC stream (after gunzip). */
  readonly offset: number
}

/** Why a record was skipped. */
export type WarcSkipReason = 'tooLarge' | 'corrupt' | 'truncated'

/** A record that was not delivered, and why (`emitSkipped`). */
export type WarcSkip = {
  readonly skipped: WarcSkipReason
  /** The WARC file. */
  readonly file: string
  /** Byte offset of the record in the WARC stream (after gunzip). */
  readonly offset: number
  /** `WARC-Target-URI`, when the headers could be read. */
  readonly url?: string
  readonly message: string
}

export type WarcOptions = {
  /** WARC record types to keep. @default ['response'] */
  readonly recordTypes?: readonly string[]
  /**
   * Payload media types to keep (HTTP `Content-Type` without parameters), or `'*'` for all.
   * @default ['text/html', 'application/xhtml+xml']
   */
  readonly contentTypes?: readonly string[] | '*'
  /**
   * A record whose decoded payload is larger than this is drained without being kept, then
   * skipped and counted (`tooLarge`), so one huge record never sits in memory. @default 16 MiB
   */
  readonly maxRecordBytes?: number
  /**
   * A file that ends inside a record (a cut download, or a `.warc.gz` whose last member is
   * incomplete): every whole record before the cut is delivered, then `error` raises
   * `CORRUPT_WARC`/`CORRUPT_COMPRESSED` naming the file, while `stop` ends the file and counts
   * it in `truncatedFiles`. @default 'error'
   */
  readonly onTruncated?: 'error' | 'stop'
  /** Also deliver each skipped record as a `WarcSkip` in the stream (they are always counted). @default false */
  readonly emitSkipped?: boolean
}

/** The largest payload a record may have by default: 16 MiB. */
export const DEFAULT_MAX_WARC_RECORD_BYTES = 16 * 2 ** 20

const HTML_TYPES = ['text/html', 'application/xhtml+xml']
const BATCH = 64

/** warcio's internal payload reader: what is left of the record's declared length after reading. */
type LimitReader = AsyncIterable<Uint8Array> & { limit: number }

export async function* readWarc(
  url: string,
  opts: WarcOptions = {},
  counters?: TaskCounters,
): AsyncGenerator<(WarcPage | WarcSkip)[]> {
  const max = opts.maxRecordBytes ?? DEFAULT_MAX_WARC_RECORD_BYTES
  const types = new Set(opts.recordTypes ?? ['response'])
  const contentTypes = opts.contentTypes === '*' ? undefined : new Set(opts.contentTypes ?? HTML_TYPES)
  const input = await openInput(url, counters)
  const parser = new WARCParser(input as AsyncIterable<Uint8Array>)
  let ready: (WarcPage | WarcSkip)[] = []
  let complete = 0
  let at = 0
  const skip = (reason: WarcSkipReason, offset: number, message: string, target?: string) => {
    if (reason !== 'truncated' && counters) counters.skippedRecords++
    log.warn({ file: url, offset, reason, target }, `WARC record skipped: ${message}`)
    if (opts.emitSkipped)
      ready.push({ skipped: reason, file: url, offset, ...(target ? { url: target } : {}), message })
  }

  let failure: unknown
  try {
    for (;;) {
      const record = await parser.parse()
      if (record === null) break
      at = parser.offset
      const target = record.warcTargetURI ?? undefined
      const read = await readRecord(record, { types, contentTypes, max })
      if (read.kind === 'truncated') {
        failure = new ZephyrError(
          'CORRUPT_WARC',
          `${url}: the record at byte ${at} ends before its Content-Length (${read.message}): ` +
            `the file is truncated, e.g. by an interrupted download`,
          false,
          { truncated: true },
        )
        break
      }
      complete++
      if (read.kind === 'skip') skip(read.reason, at, read.message, target)
      else if (read.kind === 'page') ready.push({ ...read.page, offset: at })
      if (ready.length >= BATCH) {
        yield ready
        ready = []
      }
    }
  } catch (err) {
    failure = err
  } finally {
    input.destroy()
  }
  // records completed before a failure are delivered first
  if (failure === undefined) {
    if (ready.length) yield ready
    return
  }
  const truncated = failure instanceof ZephyrError ? failure.truncated : isEndOfInput(failure)
  if (truncated && opts.onTruncated === 'stop') {
    if (counters) counters.truncatedFiles++
    skip('truncated', at, (failure as Error).message)
    if (ready.length) yield ready
    return
  }
  if (ready.length) yield ready
  const after = `after ${complete} complete records`
  const hint = truncated ? `; load with { onTruncated: 'stop' } to keep the complete records without an error` : ''
  const err = failure as Error
  if (err instanceof ZephyrError)
    throw new ZephyrError(err.code, `${err.message} (${after}${hint})`, err.retryable, {
      cause: err.cause,
      truncated: err.truncated,
    })
  throw new ZephyrError(
    'CORRUPT_WARC',
    `${url}: the WARC stream cannot be parsed near byte ${at} (${err.message}) ${after}${hint}`,
    false,
    { cause: err, truncated },
  )
}

function isEndOfInput(err: unknown): boolean {
  return err instanceof Error && /unexpected end of file/i.test(err.message)
}

type Read =
  | { kind: 'page'; page: Omit<WarcPage, 'offset'> }
  | { kind: 'skip'; reason: WarcSkipReason; message: string }
  | { kind: 'ignored' }
  | { kind: 'truncated'; message: string }

/** Reads (or drains) one record's payload, within the limit, and says what it was. */
async function readRecord(
  record: WARCRecord,
  o: { types: Set<string>; contentTypes: Set<string> | undefined; max: number },
): Promise<Read> {
  const raw = (record as unknown as { _reader: LimitReader })._reader
  const protocol = record.warcHeaders.protocol ?? ''
  const declared = record.warcHeader('Content-Length')
  const type = record.warcType ?? ''
  let problem: string | undefined
  if (!/^WARC\/\d/.test(protocol)) problem = `it does not start with a WARC/ version line (got "${clip(protocol)}")`
  else if (declared == null || !/^\s*\d+\s*$/.test(declared))
    problem = `its Content-Length is ${declared == null ? 'missing' : `"${clip(declared)}"`}`

  const http = record.httpHeaders
  const mediaType = (http?.headers.get('Content-Type') ?? record.warcContentType ?? '').split(';')[0]!.trim()
  const wanted =
    problem === undefined &&
    o.types.has(type) &&
    (o.contentTypes === undefined || o.contentTypes.has(mediaType.toLowerCase()))
  if (
    problem === undefined &&
    wanted &&
    http &&
    type === 'response' &&
    !isHttpStatus(http.protocol ?? '', http.statusCode)
  )
    problem = `its HTTP status line "${clip(http.statusline ?? '')}" cannot be read`

  if (!wanted || problem !== undefined) {
    for await (const _ of raw) {
      // drained, not kept
    }
    if (raw.limit > 0 && problem === undefined) return { kind: 'truncated', message: `${raw.limit} bytes missing` }
    return problem === undefined ? { kind: 'ignored' } : { kind: 'skip', reason: 'corrupt', message: problem }
  }

  const chunks: Uint8Array[] = []
  let size = 0
  const content = record.contentReader as AsyncIterable<Uint8Array> & { errored?: boolean }
  try {
    for await (const c of content) {
      size += c.length
      if (size <= o.max) chunks.push(c)
      else chunks.length = 0
    }
  } catch (err) {
    problem = `its body does not decode (${(err as Error).message})`
  }
  // what decoding left of the raw payload (a body shorter than its chunks said)
  for await (const _ of raw) {
    // drained
  }
  if (raw.limit > 0) return { kind: 'truncated', message: `${raw.limit} bytes missing` }
  if (problem === undefined && content.errored) problem = 'its chunked body is malformed'
  if (problem !== undefined) return { kind: 'skip', reason: 'corrupt', message: problem }
  if (size > o.max)
    return {
      kind: 'skip',
      reason: 'tooLarge',
      message: `its payload of ${size} bytes is over the ${o.max}-byte limit; raise maxRecordBytes to keep them`,
    }
  const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)
  const declaredCharset = charsetOf(http?.headers.get('Content-Type') ?? record.warcContentType ?? '')
  const { text, charset } = decodeHtml(body, declaredCharset)
  const status = http ? Number(http.statusCode) : undefined
  return {
    kind: 'page',
    page: {
      url: record.warcTargetURI ?? '',
      date: record.warcDate ?? '',
      recordId: record.warcHeader('WARC-Record-ID') ?? '',
      contentType: mediaType.toLowerCase(),
      ...(status === undefined ? {} : { httpStatus: status }),
      ...(charset === undefined ? {} : { charset }),
      html: text,
    },
  }
}

function isHttpStatus(protocol: string, code: unknown): boolean {
  const n = Number(code)
  return /^HTTP\/\d/i.test(protocol) && Number.isInteger(n) && n >= 100 && n <= 599
}

function clip(s: string): string {
  return s.length > 60 ? `${s.slice(0, 60)}…` : s
}

/** The `charset` parameter of a Content-Type value, if any. */
export function charsetOf(contentType: string): string | undefined {
  const m = /;\s*charset\s*=\s*["']?([^"';\s]+)/i.exec(contentType)
  return m?.[1]
}

const META_CHARSET = /<meta[^>]+?charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)/i
const XML_ENCODING = /^\s*<\?xml[^>]+?encoding\s*=\s*["']([A-Za-z0-9_.:-]+)/
const decoders = new Map<string, InstanceType<typeof TextDecoder> | null>()

function decoderFor(label: string): InstanceType<typeof TextDecoder> | undefined {
  const key = label.toLowerCase()
  let d = decoders.get(key)
  if (d === undefined) {
    try {
      d = new TextDecoder(key)
    } catch {
      d = null // a label the WHATWG Encoding Standard does not know
    }
    decoders.set(key, d)
  }
  return d ?? undefined
}

const UTF8 = new TextDecoder('utf-8')

/**
 * windows-1252's bytes 0x80–0x9F, from the Encoding Standard's index. Node 20's TextDecoder
 * decodes windows-1252 (and its aliases iso-8859-1, ascii) as ISO-8859-1, turning `€`, `’`, `—`
 * into C1 controls; they are mapped here after decoding. Unassigned bytes stay as they are.
 */
const CP1252_HIGH = '€\x81‚ƒ„…†‡ˆ‰Š‹Œ\x8DŽ\x8F\x90‘’“”•–—˜™š›œ\x9DžŸ'
const C1 = /[\x80-\x9F]/g
const HAS_C1 = /[\x80-\x9F]/

function fixCp1252(text: string): string {
  return HAS_C1.test(text) ? text.replace(C1, (c) => CP1252_HIGH[c.charCodeAt(0) - 0x80]!) : text
}

/** The encoding a byte order mark names (it wins over every declaration, as the HTML standard says). */
function bomEncoding(b: Uint8Array): string | undefined {
  if (b[0] === 0xef && b[1] === 0xbb && b[2] === 0xbf) return 'utf-8'
  if (b[0] === 0xff && b[1] === 0xfe) return 'utf-16le'
  if (b[0] === 0xfe && b[1] === 0xff) return 'utf-16be'
  return undefined
}

/**
 * Bytes of an HTML page → text: the encoding of a byte order mark, else the charset declared by
 * the HTTP header, else by a `<meta>` in the first 4 KiB (as the HTML standard's prescan looks),
 * else by an XML declaration (`<?xml … encoding="…"?>`, which XHTML and feeds rely on), else
 * UTF-8; unknown labels fall back to UTF-8. Bad bytes become U+FFFD. `charset` is the WHATWG name
 * of what was used, if declared. A `<meta>` or XML declaration naming UTF-16 is read as UTF-8 (the
 * page's ASCII bytes say it, so it is not UTF-16); the HTTP header or a BOM naming it is obeyed.
 */
export function decodeHtml(bytes: Uint8Array, declared?: string): { text: string; charset?: string } {
  const bom = bomEncoding(bytes)
  let decoder = bom !== undefined ? decoderFor(bom) : declared === undefined ? undefined : decoderFor(declared)
  if (decoder === undefined) {
    const head = Buffer.from(bytes.buffer, bytes.byteOffset, Math.min(bytes.length, 4096)).toString('latin1')
    const m = META_CHARSET.exec(head) ?? XML_ENCODING.exec(head)
    if (m) decoder = decoderFor(m[1]!)
    // a page that says UTF-16 in ASCII bytes is not UTF-16 (the HTML standard reads it as UTF-8)
    if (decoder?.encoding.startsWith('utf-16')) decoder = UTF8
  }
  if (decoder === undefined) return { text: UTF8.decode(bytes) }
  const text = decoder.decode(bytes)
  return { text: decoder.encoding === 'windows-1252' ? fixCp1252(text) : text, charset: decoder.encoding }
}
