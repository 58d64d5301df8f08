/**
 * @module A read view pinned to one version. Versions never change, so a view
 * stays a consistent snapshot however many versions land after it was opened.
 */
import type { Readable } from 'node:stream'
import type { BlobStore } from './blob-store.js'
import { FinestoreError } from './errors.js'
import type { FileEntry, JsonObject, LineageEntry, Manifest } from './manifest.js'
import { type MaterializeOptions, materializeFiles } from './materialize.js'
import { formatRef } from './names.js'

export class ArtifactView {
  constructor(
    private readonly blobs: BlobStore,
    readonly manifest: Manifest,
  ) {}

  get artifact(): string {
    return this.manifest.artifact
  }
  get version(): number {
    return this.manifest.version
  }
  /** `name@version`. */
  get ref(): string {
    return formatRef(this.manifest.artifact, this.manifest.version)
  }
  get metadata(): JsonObject {
    return this.manifest.metadata
  }
  get config(): JsonObject {
    return this.manifest.config
  }
  get lineage(): readonly LineageEntry[] {
    return this.manifest.lineage
  }

  /** File paths, sorted. */
  files(): string[] {
    return Object.keys(this.manifest.files).sort()
  }

  has(path: string): boolean {
    return Object.hasOwn(this.manifest.files, path)
  }

  /** The blob and size of `path`; `NOT_FOUND` when the version has no such file. */
  entry(path: string): FileEntry {
    const e = this.has(path) ? this.manifest.files[path] : undefined
    if (!e) {
      const some = this.files().slice(0, 5).join(', ')
      throw new FinestoreError(
        'NOT_FOUND',
        `${this.ref} has no file "${path}"; it has ${this.files().length}` +
          ` files (${some}${this.files().length > 5 ? ', …' : ''})`,
      )
    }
    return e
  }

  /** The whole file, verified against its hash. */
  async read(path: string): Promise<Uint8Array> {
    const e = this.entry(path)
    return this.blobs.read(e.blob, { artifact: this.ref, file: path }, e.size)
  }

  async readText(path: string): Promise<string> {
    return new TextDecoder().decode(await this.read(path))
  }

  /** Streaming read that errors with `IntegrityError` at its end if the bytes are damaged. */
  async readStream(path: string): Promise<Readable> {
    const e = this.entry(path)
    return this.blobs.readStream(e.blob, { artifact: this.ref, file: path }, e.size)
  }

  /** Writes file `path` to the local file `dest`, which appears only once the bytes are verified. */
  async copyTo(path: string, dest: string): Promise<void> {
    const e = this.entry(path)
    await this.blobs.copyTo(e.blob, dest, { artifact: this.ref, file: path }, e.size)
  }

  /**
   * Writes every file of the version under the folder `dir` (created when missing), each verified against its hash;
   * returns the paths written. Everything is checked before the first file is written (see materialize.ts): paths
   * that do not fit in one folder, a symbolic link on the way, or a file that exists already throw `INVALID_PATH`
   * naming the version and the entry, and nothing is written. A later failure removes what was written.
   * @example await view.materialize('/tmp/model') // ['config.json', 'model.safetensors']
   */
  materialize(dir: string, opts?: MaterializeOptions): Promise<string[]> {
    return materializeFiles(this, dir, opts)
  }

  /** Reads every file through its hash; throws the first `IntegrityError`. */
  async verify(): Promise<void> {
    for (const path of this.files()) {
      const e = this.manifest.files[path]!
      await this.blobs.verify(e.blob, { artifact: this.ref, file: path }, e.size)
    }
  }
}
