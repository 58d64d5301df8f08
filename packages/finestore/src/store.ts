/**
 * @module The store: versioned artifacts on top of any rigging `Storage`.
 *
 * @example
 * const store = await openStore({ url: 'file:///data/.marin/store' })
 * const txn = await store.begin('datasets/brown', { metadata: { docs: 500 }, lineage: ['raw/brown@1'] })
 * await txn.put('part-0.jsonl', { file: './part-0.jsonl' })
 * const { version } = await txn.commit()               // ConflictError if another writer won
 * const view = await store.open(`datasets/brown@${version}`)
 * const text = await view.readText('part-0.jsonl')     // verified against its sha256
 */
import { mkdirSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { logger, MARIN_LAYOUT, openStorage, prefixPath } from '@marin/rigging'
import type { Storage } from '@marin/rigging'
import type { z } from 'zod'
import { BlobStore } from './blob-store.js'
import type { BlobInfo, BlobSource } from './blob-store.js'
import { BlobCache } from './cache.js'
import type { BlobCacheOptions } from './cache.js'
import { Catalog } from './catalog.js'
import type { ArtifactRow, LineageRow, SearchQuery, VersionRow } from './catalog.js'
import { rebuildCatalog, syncCatalog } from './catalog-sync.js'
import type { RebuildReport, SyncReport } from './catalog-sync.js'
import { ConflictError, FinestoreError } from './errors.js'
import { GC_DEFAULTS, collectGarbage } from './gc.js'
import type { GcOptions, GcReport } from './gc.js'
import { deleteTag, listTags, moveTag, readTag, resolveHead } from './heads.js'
import { ScratchStorage } from './internal/scratch-storage.js'
import { isNotFound } from './internal/storage-errors.js'
import { CATALOG_FILE, manifestPath, versionsPrefix } from './layout.js'
import { parseManifest } from './manifest.js'
import type { LineageEntry, Manifest } from './manifest.js'
import { checkArtifactName, checkTagName, formatRef, parseRef } from './names.js'
import type { ArtifactRef } from './names.js'
import { scanArtifacts } from './scan.js'
import { SchemaRegistry } from './schemas.js'
import { Transaction } from './transaction.js'
import { verifyStore } from './verify.js'
import type { VerifyOptions, VerifyReport } from './verify.js'
import type { CommitResult, TransactionOptions, TxnContext } from './transaction.js'
import { ArtifactView } from './view.js'

const log = logger('finestore')

export type StoreOptions = {
  /** Storage URL (or local path) of the store root, e.g. `file:///data/.marin/store`. Give this or `storage`. */
  readonly url?: string
  /** An opened storage to use as the store root. */
  readonly storage?: Storage
  /**
   * SQLite file of the catalog, or `':memory:'`.
   * @default `<store>/catalog.sqlite` on `file://`; `<cache.dir>/catalog.sqlite` with a cache; else `':memory:'`
   */
  readonly catalog?: string
  /** Local disk cache of blobs, for remote storage. @default none */
  readonly cache?: BlobCacheOptions
  /** A transaction whose heartbeat is older than this is dead for gc. @default 3_600_000 */
  readonly txnTtlMs?: number
  /**
   * Make every upload and commit durable before it resolves (fsync on `file://`).
   * `false` is for scratch stores: uploads, manifests, HEAD and pins are written
   * with `durable: false`, still atomic and still compare-and-swapped, but a power
   * loss may lose recent commits. @default true
   */
  readonly fsync?: boolean
  /**
   * How long `store.commit` keeps retrying a commit that lost to another writer
   * (see `CommitOptions.retryBudgetMs`). @default 60_000
   */
  readonly commitRetryBudgetMs?: number
}

/** Options of `store.commit`: the transaction's, and how long to keep retrying after a conflict. */
export type CommitOptions = TransactionOptions & {
  /**
   * Start over on the new HEAD after a `ConflictError` until this much time has
   * passed since the first attempt, waiting a random time (full jitter) under an
   * exponentially growing cap between attempts, so that many writers of one
   * artifact all land. @default the store's `commitRetryBudgetMs` (60 s)
   */
  readonly retryBudgetMs?: number
  /** At most this many retries, whatever time is left. @default unlimited */
  readonly retries?: number
}

/** Backoff between commit attempts: the cap doubles from 10 ms up to 1 s. */
const RETRY_BASE_MS = 10
const RETRY_CAP_MS = 1000

/** A resolved version: `{ artifact, version }`. */
export type VersionRef = LineageEntry

export class Store {
  readonly schemas = new SchemaRegistry()
  readonly blobs: BlobStore
  readonly #ctx: TxnContext

  private constructor(
    readonly storage: Storage,
    readonly catalog: Catalog,
    readonly cache: BlobCache | undefined,
    readonly txnTtlMs: number,
    fsync: boolean,
    readonly commitRetryBudgetMs: number,
  ) {
    this.blobs = new BlobStore(storage, cache, { fsync })
    this.#ctx = {
      storage,
      blobs: this.blobs,
      schemas: this.schemas,
      txnTtlMs,
      resolve: (ref) => (typeof ref === 'string' ? this.resolve(ref) : this.#checkExists(ref)),
      headOf: (artifact) => this.head(artifact),
      manifestOf: (artifact, version) => this.manifest(artifact, version),
      onCommit: (m) => {
        try {
          this.catalog.indexVersion(m)
        } catch (err) {
          // The version is committed in storage; the index catches up with syncCatalog/rebuildCatalog.
          log.warn({ err, artifact: m.artifact, version: m.version }, 'catalog update failed after commit')
        }
      },
    }
  }

  /** Opens a store; fills the catalog from storage the first time it is used. */
  static async open(opts: StoreOptions): Promise<Store> {
    const given = opts.storage ?? (opts.url !== undefined ? await openStorage(opts.url) : undefined)
    if (!given)
      throw new FinestoreError('INVALID_INPUT', 'openStore needs `url` (e.g. "file:///data/.marin/store") or `storage`')
    const storage = opts.fsync === false ? new ScratchStorage(given) : given
    const cache = opts.cache ? await BlobCache.open(opts.cache) : undefined
    const catalogPath =
      opts.catalog ?? storage.localPath(CATALOG_FILE) ?? (opts.cache ? join(opts.cache.dir, CATALOG_FILE) : ':memory:')
    if (catalogPath !== ':memory:') mkdirSync(dirname(catalogPath), { recursive: true })
    const store = new Store(
      storage,
      new Catalog(catalogPath),
      cache,
      opts.txnTtlMs ?? GC_DEFAULTS.txnTtlMs,
      opts.fsync ?? true,
      opts.commitRetryBudgetMs ?? 60_000,
    )
    if (!store.catalog.built) await store.rebuildCatalog()
    return store
  }

  /** Registers the zod schema that metadata of `kind` must satisfy at commit. */
  registerSchema(kind: string, schema: z.ZodType): void {
    this.schemas.register(kind, schema)
  }

  /** Stores loose bytes by hash (outside any version; gc keeps them for its grace period only). */
  async putBlob(source: BlobSource): Promise<BlobInfo> {
    const r = await this.blobs.put(source)
    await this.blobs.discard(r.retained)
    return { hash: r.hash, size: r.size }
  }

  /** A blob's bytes, verified. */
  getBlob(hash: string): Promise<Uint8Array> {
    return this.blobs.read(hash)
  }

  /** Starts a transaction on `artifact`, based on its current HEAD. */
  async begin(artifact: string, opts: TransactionOptions = {}): Promise<Transaction> {
    return Transaction.begin(this.#ctx, checkArtifactName(artifact), opts)
  }

  /**
   * Runs `build` in a transaction and commits it; on `ConflictError` starts over
   * on the new HEAD after a random backoff, until `retryBudgetMs` (default 60 s)
   * is spent. `build` may run several times: stage everything inside it.
   */
  async commit(
    artifact: string,
    build: (txn: Transaction) => Promise<void>,
    opts: CommitOptions = {},
  ): Promise<CommitResult> {
    const budgetMs = opts.retryBudgetMs ?? this.commitRetryBudgetMs
    const retries = opts.retries ?? Infinity
    const started = Date.now()
    for (let attempt = 0; ; attempt++) {
      const txn = await this.begin(artifact, opts)
      try {
        await build(txn)
        return await txn.commit()
      } catch (err) {
        await txn.abort()
        if (!(err instanceof ConflictError)) throw err
        const left = started + budgetMs - Date.now()
        if (attempt >= retries || left <= 0) {
          throw new ConflictError(
            err.artifact,
            `${err.artifact}: gave up after ${attempt + 1} attempts in ` +
              `${((Date.now() - started) / 1000).toFixed(1)} s (retryBudgetMs ` +
              `${budgetMs}): ` +
              `another writer committed first each time (last: ${err.message}` +
              `). Raise retryBudgetMs, or commit to this artifact from fewer ` +
              `writers at once`,
            { cause: err },
          )
        }
        const wait = Math.random() * Math.min(RETRY_CAP_MS, RETRY_BASE_MS * 2 ** Math.min(attempt, 20))
        await new Promise((r) => setTimeout(r, Math.min(wait, left)))
      }
    }
  }

  /** The artifact's current version, or `undefined` when it has none. */
  async head(artifact: string): Promise<number | undefined> {
    return resolveHead(this.storage, checkArtifactName(artifact))
  }

  /** Resolves `name`, `name@3`, `name@tag` (or a parsed ref) to a committed version. */
  async resolve(ref: string | ArtifactRef): Promise<VersionRef> {
    const r = typeof ref === 'string' ? parseRef(ref) : ref
    const artifact = checkArtifactName(r.artifact)
    if (r.selector === undefined) {
      const v = await this.head(artifact)
      if (v === undefined)
        throw new FinestoreError(
          'NOT_FOUND',
          `artifact ${artifact} has no versions; commit one first (store.begin("${artifact}"))`,
        )
      return { artifact, version: v }
    }
    if (typeof r.selector === 'number') return this.#checkExists({ artifact, version: r.selector })
    const v = await readTag(this.storage, artifact, checkTagName(r.selector))
    if (v === undefined)
      throw new FinestoreError(
        'NOT_FOUND',
        `artifact ${artifact} has no tag "${r.selector}"; tags: ` +
          `${Object.keys(await this.tags(artifact)).join(', ') || '(none)'}`,
      )
    return { artifact, version: v }
  }

  /** The manifest of one version. `MANIFEST_INVALID` (naming the file) when it cannot be parsed. */
  async manifest(artifact: string, version: number): Promise<Manifest> {
    const path = manifestPath(checkArtifactName(artifact), version)
    let text: string
    try {
      text = await this.storage.readText(path)
    } catch (err) {
      if (!isNotFound(err)) throw err
      const head = await this.head(artifact)
      throw new FinestoreError(
        'NOT_FOUND',
        `${formatRef(artifact, version)} does not exist; ` +
          `${head === undefined ? 'the artifact has no versions' : `versions are 1…${head}`}`,
        false,
        { cause: err },
      )
    }
    return parseManifest(text, path, { artifact, version })
  }

  /** A read view pinned to the version `ref` names now. */
  async open(ref: string | ArtifactRef): Promise<ArtifactView> {
    const { artifact, version } = await this.resolve(ref)
    return new ArtifactView(this.blobs, await this.manifest(artifact, version))
  }

  /** Artifact names in storage (the source of truth), sorted. */
  async artifacts(prefix = ''): Promise<string[]> {
    return [...(await scanArtifacts(this.storage, prefix)).artifacts].sort()
  }

  /** Version numbers of an artifact in storage, ascending. */
  async versions(artifact: string): Promise<number[]> {
    const out: number[] = []
    const prefix = versionsPrefix(checkArtifactName(artifact))
    for await (const info of this.storage.list(prefix, { recursive: false })) {
      const m = /^([1-9][0-9]*)\.json$/.exec(info.path.slice(prefix.length))
      if (m) out.push(Number(m[1]))
    }
    return out.sort((a, b) => a - b)
  }

  /**
   * Points `tag` at the version `ref` names, by compare-and-swap. With `expect`
   * the move happens only if the tag is at that version now (`null`: absent).
   */
  async tag(
    ref: string | ArtifactRef,
    tag: string,
    opts: { readonly expect?: number | null } = {},
  ): Promise<VersionRef> {
    const target = await this.resolve(ref)
    await moveTag(this.storage, target.artifact, checkTagName(tag), target.version, opts.expect)
    this.catalog.setTag(target.artifact, tag, target.version)
    return target
  }

  async untag(artifact: string, tag: string): Promise<void> {
    await deleteTag(this.storage, checkArtifactName(artifact), checkTagName(tag))
    this.catalog.deleteTag(artifact, tag)
  }

  /** Tags of an artifact and the versions they name (from storage). */
  async tags(artifact: string): Promise<Record<string, number>> {
    return listTags(this.storage, checkArtifactName(artifact))
  }

  /** Versions `ref` was derived from, transitively (catalog query). */
  async ancestors(ref: string | ArtifactRef): Promise<LineageRow[]> {
    const { artifact, version } = await this.resolve(ref)
    return this.catalog.ancestors(artifact, version)
  }

  /** Versions derived from `ref`, transitively (catalog query). */
  async descendants(ref: string | ArtifactRef): Promise<LineageRow[]> {
    const { artifact, version } = await this.resolve(ref)
    return this.catalog.descendants(artifact, version)
  }

  /** Versions whose metadata matches (catalog query). */
  search(q: SearchQuery = {}): VersionRow[] {
    return this.catalog.search(q)
  }

  /** Artifacts as the catalog lists them. */
  list(prefix = ''): ArtifactRow[] {
    return this.catalog.artifacts(prefix)
  }

  /** Removes blobs no version references; see gc.ts for why this is safe during commits. */
  async gc(opts: GcOptions = {}): Promise<GcReport> {
    const r = await collectGarbage(this.storage, { txnTtlMs: this.txnTtlMs, ...opts })
    log.info(
      {
        dryRun: r.dryRun,
        deleted: r.deleted.length,
        bytes: r.bytesFreed,
        tmps: r.tmpsDeleted,
        pinsExpired: r.txnsExpired,
        pinsHeld: r.pinsHeld.length,
        scanned: r.blobsScanned,
        pinned: r.pinned,
      },
      'gc finished',
    )
    return r
  }

  /**
   * Rehashes every blob and lists the damaged (corrupt or missing) ones with the
   * versions and files they break; with `repairFrom`, restores those whose bytes
   * a file of that local folder has.
   */
  async verify(opts: VerifyOptions = {}): Promise<VerifyReport> {
    const r = await verifyStore(this.storage, this.blobs, opts)
    for (const d of r.repaired)
      log.warn(
        { blob: d.hash, problem: d.problem, from: d.from },
        `blob ${d.hash} (${d.problem}) restored from ${d.from}`,
      )
    return r
  }

  /** Recreates the catalog from storage alone. Unparsable manifests are reported, not fatal. */
  rebuildCatalog(): Promise<RebuildReport> {
    return rebuildCatalog(this.storage, this.catalog)
  }

  /** Adds to the catalog what storage has and the catalog lacks (e.g. commits of other machines). */
  syncCatalog(): Promise<SyncReport> {
    return syncCatalog(this.storage, this.catalog)
  }

  close(): void {
    this.catalog.close()
  }

  async #checkExists(ref: LineageEntry): Promise<VersionRef> {
    const artifact = checkArtifactName(ref.artifact)
    if (!(await this.storage.exists(manifestPath(artifact, ref.version)))) {
      const head = await this.head(artifact)
      throw new FinestoreError(
        'NOT_FOUND',
        `${formatRef(artifact, ref.version)} does not exist; ` +
          `${head === undefined ? `artifact ${artifact} has no versions` : `versions are 1…${head}`}`,
      )
    }
    return { artifact, version: ref.version }
  }
}

/** Opens the store at `opts.url` (or on `opts.storage`). */
export function openStore(opts: StoreOptions): Promise<Store> {
  return Store.open(opts)
}

/** The store under a marin prefix (a storage URL or a local path): `<prefix>/store`, in the prefix's own form. */
export function storeUrl(prefix: string): string {
  return prefixPath(prefix, MARIN_LAYOUT.store)
}
