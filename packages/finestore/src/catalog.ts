/**
 * @module The catalog: an SQLite index (WAL, shared by processes) of artifacts,
 * versions, files, tags and lineage, for listing, metadata search and lineage
 * walks. It is only an index: storage is the source of truth and
 * `rebuildCatalog` recreates it from there.
 */
import { createRequire } from 'node:module'
import type Database from 'better-sqlite3'
import { FinestoreError } from './errors.js'
import type { JsonObject, Manifest } from './manifest.js'

const SCHEMA = `
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS artifacts (name TEXT PRIMARY KEY, kind TEXT NOT NULL, head INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS versions (
  artifact TEXT NOT NULL, version INTEGER NOT NULL, parent INTEGER, kind TEXT NOT NULL,
  created_at TEXT NOT NULL, metadata TEXT NOT NULL, config TEXT NOT NULL, message TEXT,
  file_count INTEGER NOT NULL, total_bytes INTEGER NOT NULL,
  PRIMARY KEY (artifact, version)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS versions_kind ON versions (kind, artifact);
CREATE TABLE IF NOT EXISTS files (
  artifact TEXT NOT NULL, version INTEGER NOT NULL, path TEXT NOT NULL, blob TEXT NOT NULL, size INTEGER NOT NULL,
  PRIMARY KEY (artifact, version, path)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS files_blob ON files (blob);
CREATE TABLE IF NOT EXISTS tags (artifact TEXT NOT NULL, tag TEXT NOT NULL, version INTEGER NOT NULL, PRIMARY KEY
  (artifact, tag)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS lineage (
  artifact TEXT NOT NULL, version INTEGER NOT NULL, src_artifact TEXT NOT NULL, src_version INTEGER NOT NULL,
  PRIMARY KEY (artifact, version, src_artifact, src_version)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS lineage_src ON lineage (src_artifact, src_version);
`

/** One artifact as the catalog lists it. */
export type ArtifactRow = {
  readonly name: string
  readonly kind: string
  readonly head: number
  readonly versions: number
}

/** One version as the catalog lists it (files are in the manifest). */
export type VersionRow = {
  readonly artifact: string
  readonly version: number
  readonly parent: number | null
  readonly kind: string
  readonly createdAt: string
  readonly metadata: JsonObject
  readonly message: string | null
  readonly fileCount: number
  readonly totalBytes: number
}

/** A version reached by walking lineage, `depth` steps away (1 = a direct input or output). */
export type LineageRow = { readonly artifact: string; readonly version: number; readonly depth: number }

export type Scalar = string | number | boolean | null
/** Equality with a scalar, or a range. */
export type MetadataCondition =
  | Scalar
  | { readonly gt?: number; readonly gte?: number; readonly lt?: number; readonly lte?: number }

export type SearchQuery = {
  /** Only versions of this kind. */
  readonly kind?: string
  /** Only artifacts whose name starts with this. */
  readonly prefix?: string
  /** Dotted metadata paths (`stats.docs`) and the condition each must meet; all must hold. */
  readonly metadata?: Readonly<Record<string, MetadataCondition>>
  /** Only the latest version of each artifact. @default false */
  readonly latestOnly?: boolean
  /** @default 1000 */
  readonly limit?: number
}

type RawVersion = {
  artifact: string
  version: number
  parent: number | null
  kind: string
  created_at: string
  metadata: string
  message: string | null
  file_count: number
  total_bytes: number
}

const toVersionRow = (r: RawVersion): VersionRow => ({
  artifact: r.artifact,
  version: r.version,
  parent: r.parent,
  kind: r.kind,
  createdAt: r.created_at,
  metadata: JSON.parse(r.metadata) as JsonObject,
  message: r.message,
  fileCount: r.file_count,
  totalBytes: r.total_bytes,
})

const KEY = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/
const VERSION_COLS = 'artifact, version, parent, kind, created_at, metadata, message, file_count, total_bytes'
const likePrefix = (p: string): string => `${p.replace(/[\\%_]/g, (c) => `\\${c}`)}%`

export class Catalog {
  readonly db: Database.Database

  constructor(readonly path: string) {
    // better-sqlite3 is required when a catalog is opened, not when finestore is imported
    const Sqlite = createRequire(import.meta.url)('better-sqlite3') as typeof Database
    this.db = new Sqlite(path)
    this.db.pragma('journal_mode = WAL')
    this.db.pragma('busy_timeout = 15000')
    this.db.pragma('synchronous = NORMAL')
    this.db.exec(SCHEMA)
  }

  /** True once the catalog was filled from storage at least once. */
  get built(): boolean {
    return this.db.prepare(`SELECT 1 FROM meta WHERE key = 'built_at'`).get() !== undefined
  }

  /** Adds (or replaces) one version and moves the artifact's head forward. */
  indexVersion(m: Manifest): void {
    this.indexVersions([m])
  }

  /** Adds many versions in one SQLite transaction. */
  indexVersions(ms: readonly Manifest[]): void {
    const delFiles = this.db.prepare('DELETE FROM files WHERE artifact = ? AND version = ?')
    const delLineage = this.db.prepare('DELETE FROM lineage WHERE artifact = ? AND version = ?')
    const insVersion = this.db.prepare(
      `INSERT OR REPLACE INTO versions (${VERSION_COLS}, config) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    )
    const insFile = this.db.prepare('INSERT INTO files (artifact, version, path, blob, size) VALUES (?, ?, ?, ?, ?)')
    const insLineage = this.db.prepare(
      'INSERT OR IGNORE INTO lineage (artifact, version, src_artifact, src_version) VALUES (?, ?, ?, ?)',
    )
    const upArtifact = this.db.prepare(
      `INSERT INTO artifacts (name, kind, head) VALUES (?, ?, ?)
       ON CONFLICT (name) DO UPDATE SET head = max(head, excluded.head), kind = CASE WHEN excluded.head >= head THEN
         excluded.kind ELSE kind END`,
    )
    this.db.transaction(() => {
      for (const m of ms) {
        const files = Object.entries(m.files)
        const total = files.reduce((s, [, f]) => s + f.size, 0)
        delFiles.run(m.artifact, m.version)
        delLineage.run(m.artifact, m.version)
        insVersion.run(
          m.artifact,
          m.version,
          m.parent,
          m.kind,
          m.createdAt,
          JSON.stringify(m.metadata),
          m.message ?? null,
          files.length,
          total,
          JSON.stringify(m.config),
        )
        for (const [path, f] of files) insFile.run(m.artifact, m.version, path, f.blob, f.size)
        for (const l of m.lineage) insLineage.run(m.artifact, m.version, l.artifact, l.version)
        upArtifact.run(m.artifact, m.kind, m.version)
      }
    })()
  }

  setTag(artifact: string, tag: string, version: number): void {
    this.db.prepare('INSERT OR REPLACE INTO tags (artifact, tag, version) VALUES (?, ?, ?)').run(artifact, tag, version)
  }

  deleteTag(artifact: string, tag: string): void {
    this.db.prepare('DELETE FROM tags WHERE artifact = ? AND tag = ?').run(artifact, tag)
  }

  /** Replaces the whole index with what storage holds (see `rebuildCatalog`). */
  replaceAll(
    manifests: readonly Manifest[],
    tags: readonly { artifact: string; tag: string; version: number }[],
  ): void {
    this.db.transaction(() => {
      for (const t of ['artifacts', 'versions', 'files', 'tags', 'lineage']) this.db.exec(`DELETE FROM ${t}`)
      this.indexVersions(manifests)
      for (const t of tags) this.setTag(t.artifact, t.tag, t.version)
      this.db.prepare(`INSERT OR REPLACE INTO meta (key, value) VALUES ('built_at', ?)`).run(new Date().toISOString())
    })()
  }

  /** Artifacts, by name, optionally only those whose name starts with `prefix`. */
  artifacts(prefix = ''): ArtifactRow[] {
    return this.db
      .prepare(
        `SELECT a.name, a.kind, a.head, (SELECT count(*) FROM versions v WHERE v.artifact = a.name) AS versions
         FROM artifacts a WHERE a.name LIKE ? ESCAPE '\\' ORDER BY a.name`,
      )
      .all(likePrefix(prefix)) as ArtifactRow[]
  }

  versions(artifact: string): VersionRow[] {
    return (
      this.db
        .prepare(`SELECT ${VERSION_COLS} FROM versions WHERE artifact = ? ORDER BY version`)
        .all(artifact) as RawVersion[]
    ).map(toVersionRow)
  }

  version(artifact: string, version: number): VersionRow | undefined {
    const r = this.db
      .prepare(`SELECT ${VERSION_COLS} FROM versions WHERE artifact = ? AND version = ?`)
      .get(artifact, version) as RawVersion | undefined
    return r && toVersionRow(r)
  }

  tags(artifact: string): Record<string, number> {
    const rows = this.db.prepare('SELECT tag, version FROM tags WHERE artifact = ? ORDER BY tag').all(artifact) as {
      tag: string
      version: number
    }[]
    return Object.fromEntries(rows.map((r) => [r.tag, r.version]))
  }

  /** Versions whose metadata meets every condition, newest first. */
  search(q: SearchQuery = {}): VersionRow[] {
    const where: string[] = []
    const args: unknown[] = []
    if (q.kind !== undefined) {
      where.push('v.kind = ?')
      args.push(q.kind)
    }
    if (q.prefix !== undefined) {
      where.push(`v.artifact LIKE ? ESCAPE '\\'`)
      args.push(likePrefix(q.prefix))
    }
    if (q.latestOnly) where.push('v.version = (SELECT head FROM artifacts a WHERE a.name = v.artifact)')
    for (const [key, cond] of Object.entries(q.metadata ?? {})) {
      if (!KEY.test(key))
        throw new FinestoreError(
          'INVALID_INPUT',
          `metadata key "${key}" is invalid: use dotted names of letters, digits, "_" or "-" (e.g. "stats.docs")`,
        )
      const expr = 'json_extract(v.metadata, ?)'
      const path = `$.${key}`
      if (cond === null) {
        where.push(`${expr} IS NULL`)
        args.push(path)
      } else if (typeof cond === 'object') {
        const ops = { gt: '>', gte: '>=', lt: '<', lte: '<=' } as const
        for (const [op, sym] of Object.entries(ops)) {
          const value = cond[op as keyof typeof ops]
          if (value === undefined) continue
          where.push(`${expr} ${sym} ?`)
          args.push(path, value)
        }
      } else {
        where.push(`${expr} = ?`)
        // json_extract returns JSON true/false as 1/0.
        args.push(path, typeof cond === 'boolean' ? Number(cond) : cond)
      }
    }
    const sql = `SELECT ${VERSION_COLS.split(', ')
      .map((c) => `v.${c}`)
      .join(', ')} FROM versions v
      ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY v.created_at DESC, v.artifact, v.version DESC
        LIMIT ?`
    return (this.db.prepare(sql).all(...args, q.limit ?? 1000) as RawVersion[]).map(toVersionRow)
  }

  /** Every version this one was derived from, transitively, nearest first. */
  ancestors(artifact: string, version: number): LineageRow[] {
    return this.db
      .prepare(
        `WITH RECURSIVE walk(artifact, version, depth) AS (
           SELECT src_artifact, src_version, 1 FROM lineage WHERE artifact = ? AND version = ?
           UNION
           SELECT l.src_artifact, l.src_version, w.depth + 1 FROM lineage l JOIN walk w ON l.artifact = w.artifact
             AND l.version = w.version
         )
         SELECT artifact, version, min(depth) AS depth FROM walk GROUP BY artifact, version ORDER BY depth, artifact,
           version`,
      )
      .all(artifact, version) as LineageRow[]
  }

  /** Every version derived from this one, transitively, nearest first. */
  descendants(artifact: string, version: number): LineageRow[] {
    return this.db
      .prepare(
        `WITH RECURSIVE walk(artifact, version, depth) AS (
           SELECT artifact, version, 1 FROM lineage WHERE src_artifact = ? AND src_version = ?
           UNION
           SELECT l.artifact, l.version, w.depth + 1 FROM lineage l JOIN walk w ON l.src_artifact = w.artifact AND
             l.src_version = w.version
         )
         SELECT artifact, version, min(depth) AS depth FROM walk GROUP BY artifact, version ORDER BY depth, artifact,
           version`,
      )
      .all(artifact, version) as LineageRow[]
  }

  /** Versions whose files use blob `hash`. */
  blobUsers(hash: string): { artifact: string; version: number; path: string }[] {
    return this.db
      .prepare('SELECT artifact, version, path FROM files WHERE blob = ? ORDER BY artifact, version, path')
      .all(hash) as {
      artifact: string
      version: number
      path: string
    }[]
  }

  close(): void {
    if (this.db.open) this.db.close()
  }
}
