/**
 * @module A transaction: stage files, then commit them as one new version, all
 * or nothing. Until the manifest is created nothing of it is visible; a crash
 * leaves only unreferenced blobs and temp uploads, which gc reclaims.
 */
import type { Storage } from '@marin/rigging'
import type { BlobSource, BlobStore, Retained } from './blob-store.js'
import { ConflictError, FinestoreError } from './errors.js'
import { readGcState, waitForGc } from './gc-state.js'
import { advanceHead } from './heads.js'
import { newId } from './internal/ids.js'
import { isConditionFailed } from './internal/storage-errors.js'
import { manifestPath } from './layout.js'
import { MANIFEST_FORMAT, serializeManifest } from './manifest.js'
import type { FileEntry, JsonObject, LineageEntry, Manifest } from './manifest.js'
import { checkFilePath, checkFileSet, formatRef } from './names.js'
import { PinSet } from './pins.js'
import { defaultKind, type SchemaRegistry } from './schemas.js'

/** What a transaction needs from its store. */
export type TxnContext = {
  readonly storage: Storage
  readonly blobs: BlobStore
  readonly schemas: SchemaRegistry
  readonly txnTtlMs: number
  /** Resolves a lineage reference to a committed version (throws `NOT_FOUND`). */
  readonly resolve: (ref: string | LineageEntry) => Promise<LineageEntry>
  readonly headOf: (artifact: string) => Promise<number | undefined>
  readonly manifestOf: (artifact: string, version: number) => Promise<Manifest>
  /** Runs after a successful commit (catalog update); its failure does not undo the commit. */
  readonly onCommit: (m: Manifest) => void
}

export type TransactionOptions = {
  /** Free JSON about the version, validated against the schema registered for its kind. @default {} */
  readonly metadata?: JsonObject
  /** The configuration that produced the version. @default {} */
  readonly config?: JsonObject
  /** Versions this one was derived from: `name@3`, `name@tag`, `name` (its HEAD now) or `{artifact, version}`. @default
   * [] */
  readonly lineage?: readonly (string | LineageEntry)[]
  /** Selects the metadata schema. @default the first segment of the artifact name */
  readonly kind?: string
  readonly message?: string
  /** Start from the files of the current HEAD instead of from no files. @default false */
  readonly inherit?: boolean
}

/** What `commit` returns. */
export type CommitResult = {
  readonly artifact: string
  readonly version: number
  readonly ref: string
  readonly manifest: Manifest
}

export class Transaction {
  readonly #files = new Map<string, FileEntry>()
  readonly #retained = new Map<string, Retained>()
  readonly #inflight = new Set<Promise<unknown>>()
  readonly #lineage: (string | LineageEntry)[]
  readonly #pins: PinSet
  #metadata: JsonObject
  #config: JsonObject
  #state: 'open' | 'committing' | 'committed' | 'aborted' = 'open'

  private constructor(
    private readonly ctx: TxnContext,
    readonly artifact: string,
    private base: number | undefined,
    // The collector epoch seen before any blob was pinned (see gc-state.ts).
    private readonly epochAtBegin: number,
    private readonly opts: TransactionOptions,
  ) {
    this.#metadata = { ...(opts.metadata ?? {}) }
    this.#config = { ...(opts.config ?? {}) }
    this.#lineage = [...(opts.lineage ?? [])]
    this.#pins = new PinSet(ctx.storage, newId(), artifact, ctx.txnTtlMs)
  }

  /** Use `store.begin(artifact)`. */
  static async begin(ctx: TxnContext, artifact: string, opts: TransactionOptions = {}): Promise<Transaction> {
    const { state } = await readGcState(ctx.storage)
    const base = await ctx.headOf(artifact)
    const txn = new Transaction(ctx, artifact, base, state.epoch, opts)
    if (opts.inherit && base !== undefined) {
      for (const [path, entry] of Object.entries((await ctx.manifestOf(artifact, base)).files))
        txn.#files.set(path, entry)
    }
    return txn
  }

  /** The version this transaction builds on (`undefined` for the first version). */
  get baseVersion(): number | undefined {
    return this.base
  }

  /** Stages `source` as file `path`, replacing an earlier file of that path. Resolves once the bytes are stored. */
  async put(path: string, source: BlobSource): Promise<FileEntry> {
    this.#checkOpen()
    checkFilePath(path)
    const work = (async () => {
      const r = await this.ctx.blobs.put(source, {
        pin: (hash) => this.#pins.add(hash),
        pinTmp: (tmp) => this.#pins.addTmp(tmp),
      })
      if (this.#retained.has(r.hash)) await this.ctx.blobs.discard(r.retained)
      else this.#retained.set(r.hash, r.retained)
      const entry: FileEntry = { blob: r.hash, size: r.size }
      this.#files.set(path, entry)
      return entry
    })()
    this.#inflight.add(work)
    try {
      return await work
    } finally {
      this.#inflight.delete(work)
    }
  }

  /** Stages an already stored blob as file `path` (e.g. a file of another version). */
  async putBlob(path: string, blob: { readonly hash: string; readonly size: number }): Promise<FileEntry> {
    this.#checkOpen()
    checkFilePath(path)
    await this.#pins.add(blob.hash)
    if (!(await this.ctx.blobs.exists(blob.hash))) {
      throw new FinestoreError(
        'NOT_FOUND',
        `${this.artifact}: blob ${blob.hash} for "${path}" is not in the ` +
          `store; put the bytes with txn.put instead`,
      )
    }
    this.#retained.set(blob.hash, this.#retained.get(blob.hash) ?? {})
    const entry: FileEntry = { blob: blob.hash, size: blob.size }
    this.#files.set(path, entry)
    return entry
  }

  /** Unstages `path` (also one inherited from HEAD). */
  remove(path: string): void {
    this.#checkOpen()
    this.#files.delete(path)
  }

  /** The files the version will have. */
  files(): Record<string, FileEntry> {
    return Object.fromEntries([...this.#files].sort(([a], [b]) => (a < b ? -1 : 1)))
  }

  setMetadata(metadata: JsonObject): void {
    this.#checkOpen()
    this.#metadata = { ...metadata }
  }

  setConfig(config: JsonObject): void {
    this.#checkOpen()
    this.#config = { ...config }
  }

  addLineage(ref: string | LineageEntry): void {
    this.#checkOpen()
    this.#lineage.push(ref)
  }

  /**
   * Creates the next version from what is staged. Throws `ConflictError`
   * (nothing changed) if another writer committed since this transaction
   * began; call `rebase()` and `commit()` again, or start over.
   */
  async commit(): Promise<CommitResult> {
    this.#checkOpen()
    this.#state = 'committing'
    let manifest: Manifest
    try {
      manifest = await this.#commitManifest()
    } catch (err) {
      // Nothing became visible: the transaction stays usable (fix the input, or rebase after a conflict).
      this.#state = 'open'
      throw err
    }
    this.#state = 'committed'
    await advanceHead(this.ctx.storage, this.artifact, manifest.version)
    this.ctx.onCommit(manifest)
    await this.#release()
    return {
      artifact: this.artifact,
      version: manifest.version,
      ref: formatRef(this.artifact, manifest.version),
      manifest,
    }
  }

  /** Everything up to and including the commit point: the conditional create of the manifest. */
  async #commitManifest(): Promise<Manifest> {
    await Promise.allSettled([...this.#inflight])
    // Each path was checked when staged; together they must still fit in one folder (see view.materialize).
    checkFileSet(this.#files.keys(), this.artifact)
    const kind = this.opts.kind ?? defaultKind(this.artifact)
    const metadata = this.ctx.schemas.validate(kind, this.artifact, this.#metadata)
    const lineage: LineageEntry[] = []
    for (const ref of this.#lineage) {
      const l = await this.ctx.resolve(ref)
      if (!lineage.some((x) => x.artifact === l.artifact && x.version === l.version)) lineage.push(l)
    }
    await this.#checkBlobsSurvivedGc()
    const version = (this.base ?? 0) + 1
    const manifest: Manifest = {
      format: MANIFEST_FORMAT,
      artifact: this.artifact,
      version,
      parent: this.base ?? null,
      kind,
      createdAt: new Date().toISOString(),
      files: this.files(),
      metadata,
      config: this.#config,
      lineage,
      ...(this.opts.message !== undefined ? { message: this.opts.message } : {}),
    }
    try {
      // The commit point: exactly one writer creates slot `version`.
      await this.ctx.storage.write(manifestPath(this.artifact, version), serializeManifest(manifest), {
        condition: { ifAbsent: true },
      })
    } catch (err) {
      if (!isConditionFailed(err)) throw err
      throw new ConflictError(
        this.artifact,
        `${this.artifact}: version ${version} was committed by another ` +
          `writer after this transaction began at ` +
          `${this.base === undefined ? 'no version' : `version ${this.base}`}; ` +
          'call rebase() and commit() again, or begin a new transaction',
        { cause: err },
      )
    }
    return manifest
  }

  /** After a `ConflictError`: build on the artifact's current HEAD instead (staged files are kept as they are). */
  async rebase(): Promise<void> {
    this.#checkOpen()
    this.base = await this.ctx.headOf(this.artifact)
  }

  /** Drops everything staged; nothing becomes visible. */
  async abort(): Promise<void> {
    if (this.#state === 'committed' || this.#state === 'aborted') return
    if (this.#state === 'committing')
      throw new FinestoreError(
        'TXN_CLOSED',
        `transaction on ${this.artifact} is committing; wait for commit() instead of aborting`,
      )
    this.#state = 'aborted'
    await Promise.allSettled([...this.#inflight])
    await this.#release()
  }

  async #release(): Promise<void> {
    // The pin goes only after the manifest exists (or the version is abandoned): see gc.ts.
    await this.#pins.release()
    for (const r of this.#retained.values()) await this.ctx.blobs.discard(r).catch(() => {})
    this.#retained.clear()
  }

  /**
   * If a collector ran (or runs) since this transaction began, a blob it found by
   * dedup may have been removed before its pin was visible: wait for the collector,
   * then put back any staged blob that is gone.
   */
  async #checkBlobsSurvivedGc(): Promise<void> {
    const { state } = await readGcState(this.ctx.storage)
    if (this.epochAtBegin % 2 === 0 && state.epoch === this.epochAtBegin) return
    await waitForGc(this.ctx.storage)
    for (const [hash, retained] of this.#retained) {
      if (!this.#pins.blobs.has(hash) || [...this.#files.values()].every((f) => f.blob !== hash)) continue
      const size = [...this.#files.values()].find((f) => f.blob === hash)!.size
      if (!(await this.ctx.blobs.restore({ hash, size }, retained))) {
        throw new ConflictError(
          this.artifact,
          `${this.artifact}: staged blob ${hash} was removed by gc before ` +
            `commit (the transaction was idle longer than its ttl); stage ` +
            `the data again in a new transaction`,
        )
      }
    }
  }

  #checkOpen(): void {
    if (this.#state !== 'open')
      throw new FinestoreError(
        'TXN_CLOSED',
        `transaction on ${this.artifact} is already ${this.#state}; begin a new one`,
      )
  }
}
