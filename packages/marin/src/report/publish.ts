/**
 * @module Publishing a built site: to any rigging storage URL or local folder, or to an
 * `http(s)://` server that accepts PUT (WebDAV style). Only changed files are sent: the target
 * keeps a manifest (`.marin-report.json`, sha256 of every file) written after the files, so an
 * interrupted publish is completed by the next one.
 */
import { createHash } from 'node:crypto'
import { resolve } from 'node:path'
import { isRiggingError, openStorage, scrubSecretValues, type Storage } from '@marin/rigging'
import { MarinError } from '../errors.js'
import type { Site } from './build.js'

/** The manifest file at the target: `{ format: 1, files: { path: sha256 } }`. */
export const MANIFEST_FILE = '.marin-report.json'

/** What a publish did. */
export type PublishResult = {
  /** Where the site is: a folder path, storage URL or http(s) URL. */
  readonly target: string
  readonly uploaded: readonly string[]
  readonly unchanged: readonly string[]
  readonly deleted: readonly string[]
}

type Manifest = { format: 1; files: Record<string, string> }

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex')

const CONTENT_TYPES: Readonly<Record<string, string>> = {
  html: 'text/html; charset=utf-8',
  md: 'text/markdown; charset=utf-8',
  svg: 'image/svg+xml',
  json: 'application/json',
}

function contentType(path: string): string {
  return CONTENT_TYPES[path.split('.').at(-1) ?? ''] ?? 'text/plain; charset=utf-8'
}

function parseManifest(text: string | undefined): Manifest {
  if (!text) return { format: 1, files: {} }
  try {
    const m = JSON.parse(text) as Manifest
    // An unreadable manifest only costs a full upload.
    return m && typeof m.files === 'object' && m.files !== null ? m : { format: 1, files: {} }
  } catch {
    return { format: 1, files: {} }
  }
}

/** Where files go: the few operations publishing needs. */
type Sink = {
  readonly where: string
  readManifest(): Promise<string | undefined>
  exists(path: string): Promise<boolean>
  put(path: string, body: string): Promise<void>
  remove(path: string): Promise<void>
}

function storageSink(storage: Storage, where: string): Sink {
  return {
    where,
    async readManifest() {
      try {
        return await storage.readText(MANIFEST_FILE)
      } catch (err) {
        if (isRiggingError(err, 'STORAGE_NOT_FOUND')) return undefined
        throw err
      }
    },
    exists: (p) => storage.exists(p),
    put: async (p, body) => void (await storage.write(p, body)),
    remove: (p) => storage.delete(p),
  }
}

function httpSink(base: string): Sink {
  const root = base.endsWith('/') ? base : `${base}/`
  const url = (p: string) => new URL(p.split('/').map(encodeURIComponent).join('/'), root).href
  const fail = (what: string, p: string, detail: string) =>
    new MarinError(
      'PUBLISH_FAILED',
      `--target: ${what} ${url(p)} failed (${detail}); check that the server accepts PUT and DELETE under ${root}`,
    )
  const call = async (method: string, p: string, body?: string): Promise<Response> => {
    try {
      return await fetch(url(p), {
        method,
        ...(body !== undefined ? { body, headers: { 'content-type': contentType(p) } } : {}),
      })
    } catch (err) {
      throw fail(
        method,
        p,
        (err as Error).cause instanceof Error ? ((err as Error).cause as Error).message : (err as Error).message,
      )
    }
  }
  return {
    where: root,
    async readManifest() {
      const res = await call('GET', MANIFEST_FILE)
      if (res.status === 404) return undefined
      if (!res.ok) throw fail('GET', MANIFEST_FILE, `HTTP ${res.status}`)
      return res.text()
    },
    // Over HTTP the manifest is trusted: checking each file would cost a request per file.
    exists: async () => true,
    async put(p, body) {
      const res = await call('PUT', p, body)
      await res.arrayBuffer()
      if (!res.ok) throw fail('PUT', p, `HTTP ${res.status}`)
    },
    async remove(p) {
      const res = await call('DELETE', p)
      await res.arrayBuffer()
      // A server without DELETE leaves a stale file behind, which no page links to.
      if (!res.ok && res.status !== 404 && res.status !== 405) throw fail('DELETE', p, `HTTP ${res.status}`)
    },
  }
}

async function sinkFor(target: string): Promise<Sink> {
  if (!target) throw new MarinError('BAD_USAGE', '--target: expected a folder, a storage URL or an http(s):// URL')
  if (/^https?:\/\//i.test(target)) return httpSink(target)
  const isUrl = /^[a-z][a-z0-9+.-]*:\/\//i.test(target)
  const where = isUrl ? target : resolve(target)
  try {
    return storageSink(await openStorage(where), where)
  } catch (err) {
    throw new MarinError(
      'BAD_USAGE',
      `--target: cannot open "${target}" (${(err as Error).message}); ` +
        `pass a folder, a storage URL (file://, memory://, s3://, gs://) ` +
        `or an http(s):// URL`,
      { cause: err },
    )
  }
}

/**
 * Writes the files of `site` that differ from what the target's manifest records (or that are
 * missing there), deletes files of the previous publish that are gone, then writes the manifest.
 * A site is meant to be read by others: every secret value this process knows is scrubbed from it.
 */
export async function publishSite(site: Site, target: string): Promise<PublishResult> {
  const sink = await sinkFor(target)
  const old = parseManifest(await sink.readManifest())
  const next: Manifest = { format: 1, files: {} }
  const uploaded: string[] = []
  const unchanged: string[] = []
  for (const [path, raw] of [...site].sort(([a], [b]) => a.localeCompare(b))) {
    const body = scrubSecretValues(raw)
    const hash = sha256(body)
    next.files[path] = hash
    if (old.files[path] === hash && (await sink.exists(path))) {
      unchanged.push(path)
      continue
    }
    await sink.put(path, body)
    uploaded.push(path)
  }
  const deleted = Object.keys(old.files)
    .filter((p) => !site.has(p) && p !== MANIFEST_FILE)
    .sort()
  for (const p of deleted) await sink.remove(p)
  await sink.put(MANIFEST_FILE, `${JSON.stringify(next, null, 2)}\n`)
  return { target: sink.where, uploaded, unchanged, deleted }
}
