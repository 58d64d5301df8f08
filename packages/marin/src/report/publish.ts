/**
 * @module Publishing a built site: to any rigging storage URL or local folder, or to an
 * `http(s)://` server that accepts PUT (WebDAV style). A target keeps every run published to it:
 * a run's files go to its own folder, the front page and `runs.json` are rebuilt from the runs
 * already there plus the new one, and nothing outside the published run's folder is ever deleted.
 * Only changed files are sent: the target keeps a manifest (`.marin-report.json`, sha256 of every
 * file) written after the files, so an interrupted publish is completed by the next one.
 * The manifest and `runs.json` at the target are data others may have edited: every path read from
 * them is checked (see `sitePathProblem`) and every URL is checked to be under the target before a
 * request, so no publish reads, writes or deletes anything outside the site.
 */
import { createHash } from 'node:crypto'
import { resolve } from 'node:path'
import { isRiggingError, openStorage, scrubSecretValues, type Storage } from '@marin/rigging'
import { MarinError } from '../errors.js'
import { RUN_SUMMARY_FILE, type Site } from './build.js'
import { DOCS_INDEX } from './docs-site.js'
import { RUNS_FILE, formatRuns, mergeRuns, parseRuns, renderIndex, type RunSummary } from './site-index.js'
import { sitePathProblem } from './site-paths.js'

/** The manifest file at the target: `{ format: 1, files: { path: sha256 } }`. */
export const MANIFEST_FILE = '.marin-report.json'

/** What a publish did. */
export type PublishResult = {
  /** Where the site is: a folder path, storage URL or http(s) URL. */
  readonly target: string
  readonly uploaded: readonly string[]
  readonly unchanged: readonly string[]
  readonly deleted: readonly string[]
  /** Entries of the target's manifest dropped by `repair` (paths outside the site). */
  readonly dropped: readonly string[]
  /** What was odd at the target and how it was handled (a dropped manifest entry, a skipped `runs.json` entry). */
  readonly warnings: readonly string[]
}

/** How to publish. */
export type PublishOptions = {
  /**
   * Drop the target manifest's entries that are not paths inside the site (naming each in the
   * warnings) and write the manifest again from the valid ones, instead of refusing to publish.
   * The files such entries name are left alone.
   * @default false
   */
  readonly repair?: boolean
}

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

const MAX_LISTED = 5

/**
 * The files the target's manifest records, path → sha256. An unreadable manifest only costs a full upload
 * (with a warning); an entry that is not a path inside the site refuses the publish, naming the manifest and
 * the entry, unless `repair` drops it. Kept in a Map: a path is data, never a property name (`__proto__`).
 */
function readManifest(
  text: string | undefined,
  where: string,
  repair: boolean,
  warn: (w: string) => void,
): { files: Map<string, string>; dropped: string[] } {
  const files = new Map<string, string>()
  if (!text) return { files, dropped: [] }
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch (err) {
    warn(`${where} is not JSON (${(err as Error).message}); every file is sent again and the manifest rewritten`)
    return { files, dropped: [] }
  }
  const listed = (parsed as { files?: unknown } | null)?.files
  if (!listed || typeof listed !== 'object' || Array.isArray(listed)) {
    warn(`${where} has no "files" object; every file is sent again and the manifest rewritten`)
    return { files, dropped: [] }
  }
  const bad: [string, string][] = []
  for (const [path, hash] of Object.entries(listed)) {
    const why = sitePathProblem(path)
    if (why) bad.push([path, why])
    // A hash that is not one only costs sending that file again.
    else if (path !== MANIFEST_FILE) files.set(path, typeof hash === 'string' ? hash : '')
  }
  if (bad.length > 0 && !repair) {
    const shown = bad.slice(0, MAX_LISTED).map(([p, why]) => `${JSON.stringify(p)} (${why})`)
    const more = bad.length > MAX_LISTED ? ` and ${bad.length - MAX_LISTED} more` : ''
    throw new MarinError(
      'PUBLISH_FAILED',
      `${where}: ${bad.length === 1 ? 'entry' : 'entries'} ${shown.join(', ')}${more} ` +
        `${bad.length === 1 ? 'is not a path' : 'are not paths'} inside the site; nothing was published. ` +
        `Publish again with --repair to drop ${bad.length === 1 ? 'it' : 'them'} from the manifest ` +
        `(the files named are left alone), or remove ${bad.length === 1 ? 'it' : 'them'} from the file by hand`,
    )
  }
  for (const [p, why] of bad) warn(`${where}: entry ${JSON.stringify(p)} dropped (${why})`)
  return { files, dropped: bad.map(([p]) => p) }
}

/** `path`, refused unless it is a path inside the site: the last check before any request or write. */
function inSite(path: string, where: string): string {
  const why = sitePathProblem(path)
  if (why)
    throw new MarinError('PUBLISH_FAILED', `--target ${where}: refusing ${JSON.stringify(path)}: ${why}; nothing sent`)
  return path
}

/** Where files go: the few operations publishing needs. */
type Sink = {
  readonly where: string
  /** A file's text, or undefined where there is none. */
  read(path: string): Promise<string | undefined>
  exists(path: string): Promise<boolean>
  put(path: string, body: string): Promise<void>
  remove(path: string): Promise<void>
}

function storageSink(storage: Storage, where: string): Sink {
  const at = (p: string) => inSite(p, where)
  return {
    where,
    async read(path) {
      try {
        return await storage.readText(at(path))
      } catch (err) {
        if (isRiggingError(err, 'STORAGE_NOT_FOUND')) return undefined
        throw err
      }
    },
    exists: (p) => storage.exists(at(p)),
    put: async (p, body) => void (await storage.write(at(p), body)),
    remove: (p) => storage.delete(at(p)),
  }
}

function httpSink(base: string): Sink {
  const root = new URL(base.endsWith('/') ? base : `${base}/`).href
  // `new URL()` resolves `..` and `%2e%2e`: the path is checked first and the URL after, so nothing outside the
  // target's prefix is ever sent a request.
  const url = (p: string) => {
    const href = new URL(inSite(p, root).split('/').map(encodeURIComponent).join('/'), root).href
    if (!href.startsWith(root) || href.length === root.length)
      throw new MarinError('PUBLISH_FAILED', `--target ${root}: refusing ${JSON.stringify(p)}: it resolves to ${href}`)
    return href
  }
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
    async read(path) {
      const res = await call('GET', path)
      if (res.status === 404) {
        await res.arrayBuffer()
        return undefined
      }
      if (!res.ok) throw fail('GET', path, `HTTP ${res.status}`)
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

const RUN_SUMMARY = new RegExp(`^(runs/[^/]+/[^/]+)/${RUN_SUMMARY_FILE.replace('.', '\\.')}$`)

/** The run folders `site` publishes, with their summaries. */
function runsOf(site: Site): { folders: string[]; summaries: RunSummary[] } {
  const folders: string[] = []
  const summaries: RunSummary[] = []
  for (const [path, body] of site) {
    const m = RUN_SUMMARY.exec(path)
    if (!m) continue
    folders.push(`${m[1]}/`)
    summaries.push(...parseRuns(`[${body}]`))
  }
  return { folders, summaries }
}

/**
 * Publishes `site` into `target`, merging: the runs it holds are added to the target's `runs.json`
 * and front page; of the files the previous publishes wrote, only those inside the folder of a
 * run published again and missing from it now are deleted. Files that differ from what the
 * target's manifest records (or are missing there) are written, then the manifest.
 * A site is meant to be read by others: every secret value this process knows is scrubbed from it.
 * A manifest entry outside the site refuses the publish before anything is sent (see `PublishOptions.repair`).
 */
export async function publishSite(site: Site, target: string, opts: PublishOptions = {}): Promise<PublishResult> {
  const sink = await sinkFor(target)
  for (const path of site.keys()) inSite(path, sink.where)
  const warnings: string[] = []
  const warn = (w: string) => warnings.push(w)
  const at = (p: string) => `${sink.where.replace(/\/+$/, '')}/${p}`
  const old = readManifest(await sink.read(MANIFEST_FILE), at(MANIFEST_FILE), !!opts.repair, warn)
  const { folders, summaries } = runsOf(site)
  const files = new Map(site)
  if (summaries.length > 0) {
    const runs = mergeRuns(parseRuns(await sink.read(RUNS_FILE), warn, at(RUNS_FILE)), summaries)
    files.set(RUNS_FILE, formatRuns(runs))
    // The front page links the docs when this publish or an earlier one put them there.
    files.set('index.html', renderIndex(runs, { docs: files.has(DOCS_INDEX) || old.files.has(DOCS_INDEX) }))
  }
  const next = new Map<string, string>()
  const uploaded: string[] = []
  const unchanged: string[] = []
  for (const [path, raw] of [...files].sort(([a], [b]) => a.localeCompare(b))) {
    const body = scrubSecretValues(raw)
    const hash = sha256(body)
    next.set(path, hash)
    if (old.files.get(path) === hash && (await sink.exists(path))) {
      unchanged.push(path)
      continue
    }
    await sink.put(path, body)
    uploaded.push(path)
  }
  const deleted: string[] = []
  for (const [p, hash] of [...old.files].sort(([a], [b]) => a.localeCompare(b))) {
    if (files.has(p)) continue
    if (folders.some((f) => p.startsWith(f))) deleted.push(p)
    else next.set(p, hash) // another run's file, or one this site does not hold: kept
  }
  for (const p of deleted) await sink.remove(p)
  const sorted = { format: 1, files: Object.fromEntries([...next].sort(([a], [b]) => a.localeCompare(b))) }
  await sink.put(MANIFEST_FILE, `${JSON.stringify(sorted, null, 2)}\n`)
  return { target: sink.where, uploaded, unchanged, deleted, dropped: old.dropped, warnings }
}
