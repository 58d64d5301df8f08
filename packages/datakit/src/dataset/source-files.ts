/**
 * @module What an ingest source is: local paths, globs or storage URLs, expanded to
 * files, fingerprinted by content (so the same bytes give the same version on any
 * machine) and checked for invalid UTF-8.
 */
import { createHash } from 'node:crypto'
import { isAbsolute, resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { openStorage } from '@marin/rigging'
import { Dataset, ZephyrContext } from '@marin/zephyr'
import { DatakitError } from '../errors.js'

/** One source file: where it is, its SHA-256 and size, and how many invalid UTF-8 sequences it holds. */
export type SourceFile = {
  readonly url: string
  readonly sha256: string
  readonly bytes: number
  readonly invalidUtf8: number
}

const SCHEME = /^[a-z][a-z0-9+.-]*:\/\//i

/** A path or URL as a URL zephyr and rigging storage understand. */
export function toUrl(p: string): string {
  if (SCHEME.test(p)) return p
  return pathToFileURL(isAbsolute(p) ? p : resolve(p)).href
}

/** A URL as (storage root, object path): `scheme://bucket` + the rest; local files under `file:///`. */
export function splitUrl(url: string): { root: string; path: string } {
  const m = /^([a-z][a-z0-9+.-]*):\/\/([^/]*)(\/.*)?$/i.exec(url)
  if (!m || m[1]!.toLowerCase() === 'file') {
    return { root: 'file:///', path: fileURLToPath(toUrl(url)).replace(/^\/+/, '') }
  }
  return { root: `${m[1]!.toLowerCase()}://${m[2]}`, path: (m[3] ?? '').replace(/^\/+/, '') }
}

/** Every file matched by the patterns, sorted and unique; no match at all → `SOURCE_NOT_FOUND`. */
export async function expandSources(patterns: readonly string[]): Promise<string[]> {
  if (patterns.length === 0)
    throw new DatakitError('SOURCE_EMPTY', 'ingest: source is empty; pass a path, glob or storage URL')
  // Only glob expansion: no user code and a list of names, not worth starting a worker process.
  const ctx = new ZephyrContext({ inProcess: true, progress: 'off' })
  const out = new Set<string>()
  for (const p of patterns) {
    try {
      const { results } = await ctx.execute(Dataset.fromFiles(toUrl(p)))
      for (const u of results) out.add(u)
    } catch (err) {
      throw new DatakitError(
        'SOURCE_NOT_FOUND',
        `ingest: source "${p}" matches no file (${(err as Error).message}); check the path or glob`,
        { cause: err },
      )
    }
  }
  await ctx.close()
  return [...out].sort()
}

/** Reads a file once: its SHA-256, size and invalid UTF-8 count (a U+FFFD the decoder made, not one the file encodes).
 * */
export async function fingerprint(url: string, checkUtf8: boolean): Promise<SourceFile> {
  const { root, path } = splitUrl(url)
  const storage = await openStorage(root)
  const stream = await storage.readStream(path)
  const hash = createHash('sha256')
  const decoder = new TextDecoder('utf-8')
  let bytes = 0
  let replaced = 0
  let encodedFffd = 0
  let tail = new Uint8Array(0)
  const countFffd = (s: string): number => {
    let n = 0
    for (let i = s.indexOf('\uFFFD'); i >= 0; i = s.indexOf('\uFFFD', i + 1)) n++
    return n
  }
  for await (const chunk of stream as AsyncIterable<Uint8Array>) {
    hash.update(chunk)
    bytes += chunk.length
    if (!checkUtf8) continue
    replaced += countFffd(decoder.decode(chunk, { stream: true }))
    // U+FFFD written in the file as EF BF BD is text, not damage; count those to subtract them.
    const joined = new Uint8Array(tail.length + chunk.length)
    joined.set(tail)
    joined.set(chunk, tail.length)
    for (let i = 0; i + 2 < joined.length; i++)
      if (joined[i] === 0xef && joined[i + 1] === 0xbf && joined[i + 2] === 0xbd) encodedFffd++
    tail = joined.slice(Math.max(0, joined.length - 2))
  }
  if (checkUtf8) replaced += countFffd(decoder.decode())
  return { url, sha256: hash.digest('hex'), bytes, invalidUtf8: Math.max(0, replaced - encodedFffd) }
}
