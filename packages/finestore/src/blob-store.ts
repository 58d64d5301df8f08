/**
 * @module Content-addressed blobs: streaming put that hashes while it writes,
 * reads verified against the hash, and dedup of identical content.
 *
 * A streamed upload goes to `tmp/<id>` first (its hash is known only at the end,
 * and is computed in the same pass as the copy) and then gets its name by a
 * conditional move to `blobs/sha256/ab/<hash>` (`Storage.rename` with `ifAbsent`:
 * a locked rename on `file://`, no second copy). If the name already exists the
 * content is already stored: that is the dedup. A blob found that way is trusted
 * only after its bytes hash to its name again: a damaged one (bit rot, a bad
 * copy) is replaced by the fresh upload, by compare-and-swap on the generation
 * that was checked, and a warning names it.
 */
import { createHash } from 'node:crypto'
import { createReadStream } from 'node:fs'
import { type FileHandle, mkdir, open, rename, rm } from 'node:fs/promises'
import { dirname } from 'node:path'
import { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { logger } from '@marin/rigging'
import type { Storage, WriteCondition } from '@marin/rigging'
import type { BlobCache } from './cache.js'
import { FinestoreError, IntegrityError } from './errors.js'
import { HASH_RE, HashingTransform, VerifyingTransform, sha256Hex } from './internal/hashing.js'
import { newId } from './internal/ids.js'
import { type Copied, copyHashing, readHashing, writeHashing } from './internal/copy-hashing.js'
import { openLocal, openLocalHandle, writeLocalHashing } from './internal/local-files.js'
import { moveObject } from './internal/move-object.js'
import { isConditionFailed, isNotFound } from './internal/storage-errors.js'
import { blobPath, tmpPath } from './layout.js'

const log = logger('finestore')

/** Bytes, UTF-8 text, a stream of chunks, or a local file to read. */
export type BlobSource = Uint8Array | string | AsyncIterable<Uint8Array> | { readonly file: string }

export type BlobInfo = { readonly hash: string; readonly size: number }

/** What the upload keeps so that the blob can be put back if a concurrent gc removed it before commit. */
export type Retained = { readonly tmp?: string; readonly bytes?: Uint8Array }

export type PutResult = BlobInfo & {
  /** The content was already stored (and intact) under its hash; nothing new was written. */
  readonly deduped: boolean
  /** A damaged blob of this hash was found and replaced by these verified bytes. */
  readonly repaired: boolean
  readonly retained: Retained
}

/** What is stored under a hash: intact bytes, damaged bytes (with what they hash to), or nothing. */
export type BlobState =
  | { readonly state: 'intact'; readonly size: number; readonly generation: string }
  | { readonly state: 'corrupt'; readonly size: number; readonly generation: string; readonly actualHash: string }
  | { readonly state: 'missing' }

export type PutOptions = {
  /** Called once the hash is known and before the blob is created or found: transactions pin it here. */
  readonly pin?: (hash: string) => Promise<void>
  /** Called with the temp upload's path before it is created, for the same reason. */
  readonly pinTmp?: (tmp: string) => Promise<void>
}

/** Where a blob is used, so that an integrity failure can say what is damaged. */
export type ReadContext = { readonly artifact?: string; readonly file?: string }

const where = (ctx: ReadContext | undefined): string =>
  ctx?.artifact ? ` (file "${ctx.file ?? '?'}" of ${ctx.artifact})` : ''

export function checkHash(hash: string): string {
  if (!HASH_RE.test(hash))
    throw new FinestoreError(
      'INVALID_HASH',
      `blob hash "${hash}" is invalid: expected 64 lowercase hex digits of a sha256`,
    )
  return hash
}

export type BlobStoreOptions = {
  /**
   * fsync streamed uploads on `file://` before they get their blob name, so that a
   * blob name never outlives its bytes in a power loss. Turn off only for scratch stores.
   * @default true
   */
  readonly fsync?: boolean
}

export class BlobStore {
  readonly #fsync: boolean

  constructor(
    readonly storage: Storage,
    readonly cache?: BlobCache,
    opts: BlobStoreOptions = {},
  ) {
    this.#fsync = opts.fsync ?? true
  }

  /** Stores `source` under its sha256 and returns its hash and size. */
  async put(source: BlobSource, opts: PutOptions = {}): Promise<PutResult> {
    if (typeof source === 'string') return this.#putBytes(Buffer.from(source, 'utf8'), opts)
    if (source instanceof Uint8Array) return this.#putBytes(source, opts)
    return this.#putStream(source, opts)
  }

  async exists(hash: string): Promise<boolean> {
    return this.storage.exists(blobPath(checkHash(hash)))
  }

  /** Whole blob, verified. */
  async read(hash: string, ctx?: ReadContext, size?: number): Promise<Uint8Array> {
    checkHash(hash)
    // A cached copy that rotted on local disk is dropped and fetched once more from storage.
    for (let attempt = 0; ; attempt++) {
      const cached = this.cache ? await this.#cached(hash, ctx, size) : undefined
      const got = await this.#readWhole(hash, ctx, cached ?? this.storage.localPath(blobPath(hash)))
      if (got.hash === hash && (size === undefined || got.bytes.length === size)) return got.bytes
      if (cached === undefined || attempt === 1) throw this.#mismatch(hash, ctx)(got.hash, got.bytes.length)
      await this.cache!.remove(hash)
    }
  }

  /** The bytes and their sha256; a local file is hashed while it is read. */
  async #readWhole(
    hash: string,
    ctx: ReadContext | undefined,
    local: string | undefined,
  ): Promise<{ bytes: Uint8Array; hash: string }> {
    const path = blobPath(hash)
    try {
      if (local === undefined) {
        const bytes = await this.storage.read(path)
        return { bytes, hash: sha256Hex(bytes) }
      }
      const fh = await openLocalHandle(local, path)
      try {
        return await readHashing(fh)
      } finally {
        await fh.close()
      }
    } catch (err) {
      throw this.#readError(err, hash, ctx)
    }
  }

  /**
   * Streaming read. The stream errors with `IntegrityError` at its end when the
   * bytes do not match, so consume it with `pipeline` (or wait for `end`) before
   * trusting what it delivered.
   */
  async readStream(hash: string, ctx?: ReadContext, size?: number): Promise<Readable> {
    checkHash(hash)
    if (this.cache) {
      const local = await this.#cached(hash, ctx, size)
      if (local !== undefined) return this.cache.readStream(hash, size, this.#mismatch(hash, ctx))
    }
    return this.#rawVerified(hash, ctx, size)
  }

  /**
   * Writes the blob to the local file `dest`, which appears (by rename) only once
   * the bytes written are verified; on `file://` or from the cache the bytes are
   * hashed in the same pass as the copy.
   */
  async copyTo(hash: string, dest: string, ctx?: ReadContext, size?: number): Promise<void> {
    checkHash(hash)
    await mkdir(dirname(dest), { recursive: true })
    const tmp = `${dest}.${newId()}.part`
    try {
      // A cached copy that rotted on local disk is dropped and fetched once more from storage.
      for (let attempt = 0; ; attempt++) {
        const cached = this.cache ? await this.#cached(hash, ctx, size) : undefined
        const local = cached ?? this.storage.localPath(blobPath(hash))
        const got = await this.#copyOut(hash, ctx, local, tmp)
        if (got.hash === hash && (size === undefined || got.size === size)) break
        await rm(tmp, { force: true })
        if (cached === undefined || attempt === 1) throw this.#mismatch(hash, ctx)(got.hash, got.size)
        await this.cache!.remove(hash)
      }
      await rename(tmp, dest)
    } finally {
      await rm(tmp, { force: true })
    }
  }

  async #copyOut(hash: string, ctx: ReadContext | undefined, local: string | undefined, tmp: string): Promise<Copied> {
    const path = blobPath(hash)
    let from: FileHandle | Readable
    try {
      from = local !== undefined ? await openLocalHandle(local, path) : await this.storage.readStream(path)
    } catch (err) {
      throw this.#readError(err, hash, ctx)
    }
    try {
      const out = await open(tmp, 'wx')
      try {
        return from instanceof Readable
          ? await writeHashing(from, out, { fsync: false })
          : await copyHashing(from, out, { fsync: false })
      } finally {
        await out.close()
      }
    } catch (err) {
      throw this.#readError(err, hash, ctx)
    } finally {
      if (from instanceof Readable) from.destroy()
      else await from.close()
    }
  }

  /** Reads the whole blob through the verifier; throws `IntegrityError` if it is damaged or missing. */
  async verify(hash: string, ctx?: ReadContext, size?: number): Promise<void> {
    const s = await this.#rawVerified(checkHash(hash), ctx, size)
    for await (const _ of s);
  }

  /**
   * Hashes the stored bytes of `hash` again (streamed, never held whole). The
   * generation is the one the bytes were read at, for a compare-and-swap that
   * replaces exactly the damaged bytes.
   */
  async inspect(hash: string): Promise<BlobState> {
    const path = blobPath(checkHash(hash))
    const info = await this.storage.stat(path)
    if (!info) return { state: 'missing' }
    let src: Readable
    try {
      const local = this.storage.localPath(path)
      src = local !== undefined ? await openLocal(local, path) : await this.storage.readStream(path)
    } catch (err) {
      if (isNotFound(err)) return { state: 'missing' }
      throw err
    }
    const h = createHash('sha256')
    let size = 0
    for await (const chunk of src as AsyncIterable<Buffer>) {
      h.update(chunk)
      size += chunk.length
    }
    const actualHash = h.digest('hex')
    return actualHash === hash
      ? { state: 'intact', size, generation: info.generation }
      : { state: 'corrupt', size, generation: info.generation, actualHash }
  }

  /** Puts a blob back from what its upload retained; false when nothing was retained. */
  async restore(info: BlobInfo, retained: Retained): Promise<boolean> {
    const path = blobPath(info.hash)
    if (await this.storage.exists(path)) return true
    if (retained.bytes) {
      await this.#createIfAbsent(() => this.storage.write(path, retained.bytes!, { condition: { ifAbsent: true } }))
      return true
    }
    if (retained.tmp !== undefined && (await this.storage.exists(retained.tmp))) {
      await this.#promote(retained.tmp, path)
      return true
    }
    return false
  }

  /** Releases what an upload retained. */
  async discard(retained: Retained): Promise<void> {
    if (retained.tmp !== undefined) await this.storage.delete(retained.tmp)
  }

  async #putBytes(bytes: Uint8Array, opts: PutOptions): Promise<PutResult> {
    const hash = sha256Hex(bytes)
    await opts.pin?.(hash)
    const path = blobPath(hash)
    const placed = await this.#place(hash, (condition) => this.storage.write(path, bytes, { condition }))
    return { hash, size: bytes.length, ...placed, retained: { bytes } }
  }

  async #putStream(src: AsyncIterable<Uint8Array> | { readonly file: string }, opts: PutOptions): Promise<PutResult> {
    const tmp = tmpPath(newId())
    await opts.pinTmp?.(tmp)
    const localTmp = this.storage.localPath(tmp)
    try {
      const { hash, size } =
        localTmp !== undefined ? await writeLocalHashing(src, localTmp, this.#fsync) : await this.#upload(src, tmp)
      await opts.pin?.(hash)
      const path = blobPath(hash)
      // The temp upload is moved to its blob name; it is kept only when the blob already
      // existed (dedup), the one case a concurrent gc can hurt before this upload's pin is seen.
      const placed = await this.#place(hash, (condition) =>
        moveObject(this.storage, tmp, path, { condition, durable: this.#fsync }),
      )
      return { hash, size, ...placed, retained: placed.deduped ? { tmp } : {} }
    } catch (err) {
      if (localTmp !== undefined) await rm(localTmp, { force: true })
      else await this.storage.delete(tmp).catch(() => {})
      throw err
    }
  }

  /** Streams `src` to the object `tmp` of a storage without local files, hashing on the way. */
  async #upload(
    src: AsyncIterable<Uint8Array> | { readonly file: string },
    tmp: string,
  ): Promise<{ hash: string; size: number }> {
    const hasher = new HashingTransform()
    const readable =
      'file' in src
        ? createReadStream(src.file, { highWaterMark: 512 << 10 })
        : src instanceof Readable
          ? src
          : Readable.from(src, { objectMode: false })
    await pipeline(readable, hasher, await this.storage.writeStream(tmp, { durable: this.#fsync }))
    return { hash: hasher.digest(), size: hasher.size }
  }

  /**
   * Gives verified bytes of `hash` their blob name through `write`: creates it when
   * absent, keeps an existing blob whose bytes still hash to `hash` (dedup), and
   * replaces a damaged one, only if it is still at the generation that was checked.
   */
  async #place(
    hash: string,
    write: (condition: WriteCondition) => Promise<unknown>,
  ): Promise<{ deduped: boolean; repaired: boolean }> {
    // Each round ends unless another writer changed the blob in between; a few rounds settle any race.
    for (let round = 0; round < 5; round++) {
      const found = await this.inspect(hash)
      if (found.state === 'intact') return { deduped: true, repaired: false }
      if (found.state === 'missing') {
        if (await this.#createIfAbsent(() => write({ ifAbsent: true }))) return { deduped: false, repaired: false }
        continue
      }
      if (await this.#createIfAbsent(() => write({ ifGeneration: found.generation }))) {
        log.warn(
          { blob: hash, path: blobPath(hash), damagedSize: found.size, damagedHash: found.actualHash },
          `damaged blob ${hash} (its ${found.size} bytes hashed to ` +
            `${found.actualHash}) replaced by a verified upload of the same content`,
        )
        return { deduped: false, repaired: true }
      }
    }
    throw new FinestoreError(
      'CONFLICT',
      `blob ${hash} kept changing while it was being stored (${blobPath(hash)}); put it again`,
      true,
    )
  }

  /**
   * Moves the bytes at `tmp` to the name `path` unless it exists; true when this call
   * created it. On `file://` a locked rename(2) of the fsynced upload: no second copy.
   */
  async #promote(tmp: string, path: string): Promise<boolean> {
    return this.#createIfAbsent(() =>
      moveObject(this.storage, tmp, path, { condition: { ifAbsent: true }, durable: this.#fsync }),
    )
  }

  async #createIfAbsent(create: () => Promise<unknown>): Promise<boolean> {
    try {
      await create()
      return true
    } catch (err) {
      if (isConditionFailed(err)) return false
      throw err
    }
  }

  async #cached(hash: string, ctx: ReadContext | undefined, size: number | undefined): Promise<string | undefined> {
    try {
      return await this.cache!.get(hash, size, () => this.storage.readStream(blobPath(hash)), this.#mismatch(hash, ctx))
    } catch (err) {
      throw this.#readError(err, hash, ctx)
    }
  }

  async #rawVerified(hash: string, ctx: ReadContext | undefined, size: number | undefined): Promise<Readable> {
    const path = blobPath(hash)
    const local = this.storage.localPath(path)
    let src: Readable
    try {
      src = local !== undefined ? await openLocal(local, path) : await this.storage.readStream(path)
    } catch (err) {
      throw this.#readError(err, hash, ctx)
    }
    const verify = new VerifyingTransform(hash, size, this.#mismatch(hash, ctx))
    src.on('error', (err) => verify.destroy(this.#readError(err, hash, ctx)))
    return src.pipe(verify)
  }

  #mismatch(hash: string, ctx: ReadContext | undefined): (actual: string, actualSize: number) => IntegrityError {
    return (actual, actualSize) =>
      new IntegrityError(
        hash,
        `blob ${hash}${where(ctx)} is corrupt: its ${actualSize} bytes hash to ${actual}. ` +
          `Commit or put the same data again (that replaces the damaged ` +
          `blob), or restore it with \`finestore verify --repair-from ` +
          `<folder with a good copy>\`.`,
        ctx?.artifact,
      )
  }

  #readError(err: unknown, hash: string, ctx: ReadContext | undefined): Error {
    if (!isNotFound(err)) return err as Error
    if (ctx?.artifact) {
      return new IntegrityError(
        hash,
        `blob ${hash}${where(ctx)} is missing from the store (` +
          `${blobPath(hash)}); commit or put the same data again, or ` +
          `restore it with \`finestore verify --repair-from <folder with a ` +
          `good copy>\``,
        ctx.artifact,
      )
    }
    return new FinestoreError(
      'NOT_FOUND',
      `blob ${hash} is not in the store (${blobPath(hash)}); put it first`,
      false,
      { cause: err },
    )
  }
}
