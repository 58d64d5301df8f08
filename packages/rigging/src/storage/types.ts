/**
 * @module The storage contract every backend (`file://`, `memory://`, `s3://`, `gs://`)
 * implements. Paths are relative to the storage root, use `/` and never `..`.
 */
import type { Readable, Writable } from 'node:stream'

/** What `stat` and `list` report about one object. */
export type ObjectInfo = {
  /** Path relative to the storage root, `/`-separated. */
  readonly path: string
  readonly size: number
  readonly mtimeMs: number
  /**
   * Opaque token that changes on every write of the object. Pass it back in
   * `{ ifGeneration }` to replace the object only if nobody wrote it since.
   * (On `s3://` it is the ETag, which stays the same when the exact same bytes
   * are written again; `file://`, `memory://` and `gs://` change it on every write.)
   */
  readonly generation: string
}

/**
 * A conditional write: the building block for compare-and-swap (finestore HEAD,
 * leases). A write whose condition does not hold throws
 * `RiggingError('STORAGE_CONDITION_FAILED')` and changes nothing.
 */
export type WriteCondition =
  /** Create the object only if it does not exist. */
  | { readonly ifAbsent: true }
  /** Replace the object only if its current generation is this one. */
  | { readonly ifGeneration: string }

export type WriteOptions = {
  /** @default undefined (unconditional) */
  readonly condition?: WriteCondition
  /**
   * Whether the object must survive a power loss once the call resolves (on
   * `file://`: fsync of the file and its folder). Pass `false` for scratch and
   * temporary objects: they still appear atomically and conditions still hold,
   * but a power loss may lose them. Object stores are always durable.
   * @default true
   */
  readonly durable?: boolean
}

export type DeleteOptions = {
  /** Delete only if the object is at this generation. */
  readonly ifGeneration?: string
  /** As in `WriteOptions`: `false` skips the folder fsync on `file://`. @default true */
  readonly durable?: boolean
}

export type ListOptions = {
  /** Descend into sub-"directories". @default true */
  readonly recursive?: boolean
}

export interface Storage {
  /** The URL this storage was opened at, e.g. `file:///data/prefix` or `memory://test`. */
  readonly url: string
  /** Whole-object read. Missing object: `RiggingError('STORAGE_NOT_FOUND')`. */
  read(path: string): Promise<Uint8Array>
  readText(path: string): Promise<string>
  /**
   * Whole-object write, always atomic: readers see the old bytes or the new
   * bytes, never a mix, even if the process dies mid-write.
   */
  write(path: string, data: Uint8Array | string, opts?: WriteOptions): Promise<ObjectInfo>
  /** Streaming read, optionally of a byte range `[start, end)`. */
  readStream(path: string, range?: { start?: number; end?: number }): Promise<Readable>
  /**
   * Streaming write; the object appears atomically when the stream finishes
   * and not at all if it errors or is destroyed.
   */
  writeStream(path: string, opts?: WriteOptions): Promise<Writable>
  /** Objects whose path starts with `prefix` (a folder prefix like `a/b/` or any string prefix). */
  list(prefix?: string, opts?: ListOptions): AsyncIterable<ObjectInfo>
  /** `undefined` when the object does not exist. */
  stat(path: string): Promise<ObjectInfo | undefined>
  exists(path: string): Promise<boolean>
  /** Deleting a missing object is not an error. */
  delete(path: string, opts?: DeleteOptions): Promise<void>
  /**
   * Copies object `from` to `to` inside this storage without moving the bytes
   * through this process where the backend can (`file://`: a kernel-side copy,
   * a reflink where the filesystem has them). `to` appears atomically and
   * `opts.condition` applies to `to`; a missing `from` is `STORAGE_NOT_FOUND`.
   * Optional: for a storage without it, stream `readStream(from)` into `writeStream(to)`.
   */
  copy?(from: string, to: string, opts?: WriteOptions): Promise<ObjectInfo>
  /**
   * Moves object `from` to `to`: on success `to` holds the bytes and `from` is
   * gone (atomic on `file://` and `memory://`; `opts.condition` applies to `to`,
   * and when it fails nothing changes). A missing `from` is `STORAGE_NOT_FOUND`.
   * Optional: for a storage without it, `copy` (or stream) and then `delete(from)`.
   */
  rename?(from: string, to: string, opts?: WriteOptions): Promise<ObjectInfo>
  /** For `file://` only: the local filesystem path of `path`; `undefined` elsewhere. */
  localPath(path: string): string | undefined
}
