/**
 * @module `file://` storage: objects are plain files under a root directory.
 *
 * Every write goes to a temp file in the target's directory, is fsynced, and
 * is renamed into place (then the directory is fsynced), so readers see the old
 * bytes or the new bytes and a crash leaves the old file intact. The commit
 * step holds the object's lock (see `file-lock.ts`), which makes the two
 * conditional writes atomic across processes:
 *
 * - `ifAbsent`: the temp file is `link()`ed to the target, which fails with
 *   EEXIST atomically if anything is there, even a file written by a tool that
 *   does not take our lock.
 * - `ifGeneration`: the current generation is checked and the temp file renamed
 *   while holding the lock, so no other writer of ours can slip in between.
 *
 * The generation is `inode-mtimeNs-size`, made unique per object under the
 * same lock (see `file-generation.ts`).
 */
import type { BigIntStats } from 'node:fs'
import { constants as fsConstants } from 'node:fs'
import { copyFile, link, mkdir, open, readdir, readFile, rename, stat, unlink } from 'node:fs/promises'
import type { FileHandle } from 'node:fs/promises'
import { dirname, join, resolve } from 'node:path'
import { Readable, Writable } from 'node:stream'
import { pathToFileURL } from 'node:url'
import { RiggingError } from '../errors.js'
import { generationOf, infoOf, stampGeneration } from './file-generation.js'
import { withFileLock } from './file-lock.js'
import type { FileLockOptions } from './file-lock.js'
import { INTERNAL_NAME, removeOrphanFiles, tempPathFor } from './file-orphans.js'
import type { RemoveOrphansOptions } from './file-orphans.js'
import { fsError } from './fs-errors.js'
import { checkPath, checkPrefix, matchesPrefix } from './paths.js'
import type { DeleteOptions, ListOptions, ObjectInfo, Storage, WriteCondition, WriteOptions } from './types.js'

const errno = (err: unknown): string | undefined => (err as NodeJS.ErrnoException | undefined)?.code

async function statFile(abs: string): Promise<BigIntStats | undefined> {
  try {
    const st = await stat(abs, { bigint: true })
    return st.isFile() ? st : undefined
  } catch (err) {
    if (errno(err) === 'ENOENT' || errno(err) === 'ENOTDIR') return undefined
    throw err
  }
}

/**
 * `mkdir -p` that reports the real cause: Node's recursive mkdir turns e.g. EROFS
 * on a read-only filesystem into a misleading ENOENT.
 */
async function makeDirs(dir: string, mode = 0o777): Promise<void> {
  try {
    await mkdir(dir, mode)
  } catch (err) {
    if (errno(err) === 'EEXIST') return
    if (errno(err) !== 'ENOENT' || dirname(dir) === dir) throw err
    await makeDirs(dirname(dir), mode)
    await mkdir(dir, mode).catch((e: unknown) => {
      if (errno(e) !== 'EEXIST') throw e
    })
  }
}

async function fsyncDir(dir: string): Promise<void> {
  const fh = await open(dir, 'r')
  try {
    await fh.sync()
  } finally {
    await fh.close()
  }
}

/** A temp file being filled, not yet visible under its target name. */
type Staged = {
  readonly rel: string
  readonly target: string
  readonly tmp: string
  readonly fh: FileHandle
  closed: boolean
}

export type FileStorageOptions = {
  readonly lock?: FileLockOptions
  /**
   * Owner-only: objects are created 0600 and the folders the storage creates 0700 (the umask
   * can only remove more), for status, logs and records that may hold what no one else should
   * read. Folders that already exist keep their mode.
   * @default false (0666 and 0777 less the umask)
   */
  readonly private?: boolean
}

/** Storage over a local directory; see the module comment for the guarantees. */
export class FileStorage implements Storage {
  readonly url: string
  /** Absolute path of the storage root. */
  readonly root: string

  constructor(
    root: string,
    private readonly opts: FileStorageOptions = {},
  ) {
    this.root = resolve(root)
    this.url = pathToFileURL(this.root).href
  }

  private abs(rel: string): string {
    return join(this.root, rel)
  }

  private fail(err: unknown, op: string, rel: string): RiggingError {
    return fsError(err, op, rel, this.url)
  }

  localPath(path: string): string {
    return this.abs(checkPath(path, this.url))
  }

  async read(path: string): Promise<Uint8Array> {
    const rel = checkPath(path, this.url)
    try {
      const buf = await readFile(this.abs(rel))
      return new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength)
    } catch (err) {
      throw this.notFoundOr(err, 'read', rel)
    }
  }

  async readText(path: string): Promise<string> {
    return new TextDecoder().decode(await this.read(path))
  }

  private notFoundOr(err: unknown, op: string, rel: string): RiggingError {
    if (errno(err) === 'ENOENT' || errno(err) === 'ENOTDIR' || errno(err) === 'EISDIR') {
      return new RiggingError('STORAGE_NOT_FOUND', `storage ${this.url}: object ${rel} does not exist`, { cause: err })
    }
    return this.fail(err, op, rel)
  }

  private get fileMode(): number {
    return this.opts.private ? 0o600 : 0o666
  }

  private get dirMode(): number {
    return this.opts.private ? 0o700 : 0o777
  }

  private async stage(rel: string): Promise<Staged> {
    const target = this.abs(rel)
    try {
      await makeDirs(dirname(target), this.dirMode)
      const tmp = tempPathFor(target)
      const fh = await open(tmp, 'wx', this.fileMode)
      return { rel, target, tmp, fh, closed: false }
    } catch (err) {
      throw this.fail(err, 'write', rel)
    }
  }

  private async discard(s: Staged): Promise<void> {
    if (!s.closed) {
      s.closed = true
      await s.fh.close().catch(() => undefined)
    }
    await unlink(s.tmp).catch(() => undefined)
  }

  private conditionFailed(rel: string, why: string): RiggingError {
    return new RiggingError('STORAGE_CONDITION_FAILED', `storage ${this.url}: ${rel} ${why}`)
  }

  /** fsync the staged data (if durable), then (under the object lock) check the condition and make it visible. */
  private async commit(s: Staged, condition: WriteCondition | undefined, durable = true): Promise<ObjectInfo> {
    const check = (cur: BigIntStats | undefined) => this.checkCondition(s.rel, condition, cur)
    try {
      // A write that has already lost its race fails here, before paying for fsync and the lock.
      if (condition) check(await statFile(s.target))
      if (durable) await s.fh.sync()
      return await withFileLock(
        s.target,
        async () => {
          const cur = await statFile(s.target)
          check(cur)
          // The new generation must differ from every earlier one of this object.
          const st = await stampGeneration(s.fh, cur)
          s.closed = true
          await s.fh.close()
          if (condition && 'ifAbsent' in condition) {
            try {
              await link(s.tmp, s.target)
            } catch (err) {
              if (errno(err) === 'EEXIST') throw this.conditionFailed(s.rel, 'already exists (write with ifAbsent)')
              throw err
            }
            await unlink(s.tmp)
          } else {
            await rename(s.tmp, s.target)
          }
          if (durable) await fsyncDir(dirname(s.target))
          return infoOf(s.rel, st)
        },
        this.opts.lock,
      )
    } catch (err) {
      await this.discard(s)
      throw this.fail(err, 'write', s.rel)
    }
  }

  async write(path: string, data: Uint8Array | string, opts: WriteOptions = {}): Promise<ObjectInfo> {
    const rel = checkPath(path, this.url)
    const s = await this.stage(rel)
    try {
      await s.fh.writeFile(data)
    } catch (err) {
      await this.discard(s)
      throw this.fail(err, 'write', rel)
    }
    return this.commit(s, opts.condition, opts.durable)
  }

  async readStream(path: string, range: { start?: number; end?: number } = {}): Promise<Readable> {
    const rel = checkPath(path, this.url)
    const start = range.start ?? 0
    if (
      !Number.isInteger(start) ||
      start < 0 ||
      (range.end !== undefined && (!Number.isInteger(range.end) || range.end < start))
    ) {
      throw new RiggingError(
        'STORAGE_INVALID_PATH',
        `storage ${this.url}: invalid byte range ${JSON.stringify(range)}` +
          ` for ${rel}; use integers with 0 <= start <= end`,
      )
    }
    let fh: FileHandle
    try {
      fh = await open(this.abs(rel), 'r')
    } catch (err) {
      throw this.notFoundOr(err, 'read', rel)
    }
    if (range.end === start) {
      await fh.close()
      return Readable.from([])
    }
    // createReadStream's `end` is inclusive; ours is exclusive.
    return fh.createReadStream({ start, ...(range.end !== undefined ? { end: range.end - 1 } : {}) })
  }

  async writeStream(path: string, opts: WriteOptions = {}): Promise<Writable> {
    const rel = checkPath(path, this.url)
    const s = await this.stage(rel)
    let committing = false
    const writeAll = async (buf: Buffer): Promise<void> => {
      let off = 0
      while (off < buf.byteLength) off += (await s.fh.write(buf, off, buf.byteLength - off)).bytesWritten
    }
    return new Writable({
      highWaterMark: 1 << 20,
      write: (chunk: Buffer, _enc, cb) => {
        writeAll(chunk).then(
          () => cb(),
          (err: unknown) => cb(this.fail(err, 'write', rel)),
        )
      },
      writev: (chunks, cb) => {
        writeAll(Buffer.concat(chunks.map((c) => c.chunk as Buffer))).then(
          () => cb(),
          (err: unknown) => cb(this.fail(err, 'write', rel)),
        )
      },
      final: (cb) => {
        committing = true
        this.commit(s, opts.condition, opts.durable).then(
          () => cb(),
          (err: Error) => cb(err),
        )
      },
      // An errored or destroyed stream never reaches final(): drop the temp file.
      destroy: (err, cb) => {
        if (committing) return cb(err)
        this.discard(s).then(
          () => cb(err),
          () => cb(err),
        )
      },
    })
  }

  /**
   * A kernel-side copy (`copy_file_range`, or a reflink where the filesystem
   * supports it) into a temp file, then committed like any write.
   */
  async copy(from: string, to: string, opts: WriteOptions = {}): Promise<ObjectInfo> {
    const src = checkPath(from, this.url)
    const rel = checkPath(to, this.url)
    if (opts.condition) await this.precheck(rel, opts.condition)
    const s = await this.stage(rel)
    try {
      await copyFile(this.abs(src), s.tmp, fsConstants.COPYFILE_FICLONE)
      // copyFile gives the copy the mode of its source.
      if (this.opts.private) await s.fh.chmod(this.fileMode)
    } catch (err) {
      await this.discard(s)
      throw this.notFoundOr(err, 'copy', src)
    }
    return this.commit(s, opts.condition, opts.durable)
  }

  /**
   * rename(2) under the locks of both objects (taken in path order), so that no
   * writer of ours slips in between the check and the move. With `ifAbsent` the
   * move is `link` + `unlink`, which fails atomically if `to` exists.
   */
  async rename(from: string, to: string, opts: WriteOptions = {}): Promise<ObjectInfo> {
    const srcRel = checkPath(from, this.url)
    const rel = checkPath(to, this.url)
    const src = this.abs(srcRel)
    const target = this.abs(rel)
    const condition = opts.condition
    const durable = opts.durable ?? true
    const move = async (): Promise<ObjectInfo> => {
      const st = await statFile(src)
      if (!st)
        throw new RiggingError(
          'STORAGE_NOT_FOUND',
          `storage ${this.url}: object ${srcRel} does not exist (rename to ${rel})`,
        )
      const cur = srcRel === rel ? st : await statFile(target)
      this.checkCondition(rel, condition, cur)
      if (srcRel === rel) return infoOf(rel, st)
      // The moved object gets a generation newer than the one it replaces, as a write would.
      const fh = await open(src, 'r')
      let stamped: BigIntStats
      try {
        stamped = await stampGeneration(fh, cur)
      } finally {
        await fh.close()
      }
      if (condition && 'ifAbsent' in condition) {
        try {
          await link(src, target)
        } catch (err) {
          if (errno(err) === 'EEXIST') throw this.conditionFailed(rel, 'already exists (write with ifAbsent)')
          throw err
        }
        await unlink(src)
      } else {
        await rename(src, target)
      }
      if (durable) {
        await fsyncDir(dirname(target))
        if (dirname(src) !== dirname(target)) await fsyncDir(dirname(src))
      }
      return infoOf(rel, stamped)
    }
    try {
      if (condition) await this.precheck(rel, condition)
      await makeDirs(dirname(target), this.dirMode)
      const [first, second] = src < target ? [src, target] : [target, src]
      if (first === second) return await withFileLock(first, move, this.opts.lock)
      return await withFileLock(first, () => withFileLock(second, move, this.opts.lock), this.opts.lock)
    } catch (err) {
      throw this.fail(err, 'rename', `${srcRel} to ${rel}`)
    }
  }

  /** Fails early, before any work, when the condition on `rel` already does not hold. */
  private async precheck(rel: string, condition: WriteCondition): Promise<void> {
    try {
      this.checkCondition(rel, condition, await statFile(this.abs(rel)))
    } catch (err) {
      throw this.fail(err, 'write', rel)
    }
  }

  private checkCondition(rel: string, condition: WriteCondition | undefined, cur: BigIntStats | undefined): void {
    if (condition && 'ifAbsent' in condition && cur)
      throw this.conditionFailed(rel, 'already exists (write with ifAbsent)')
    if (condition && 'ifGeneration' in condition) {
      const have = cur ? generationOf(cur) : '(absent)'
      if (have !== condition.ifGeneration)
        throw this.conditionFailed(rel, `is at generation ${have}, not ${condition.ifGeneration}; re-read it and retry`)
    }
  }

  async *list(prefix = '', opts: ListOptions = {}): AsyncIterable<ObjectInfo> {
    const pre = checkPrefix(prefix, this.url)
    const recursive = opts.recursive ?? true
    yield* this.walk(pre.slice(0, pre.lastIndexOf('/') + 1), pre, recursive)
  }

  /** Lists folder `dir` ('' or 'a/b/') in path order, descending only where `pre` can still match. */
  private async *walk(dir: string, pre: string, recursive: boolean): AsyncGenerator<ObjectInfo> {
    let entries
    try {
      entries = await readdir(this.abs(dir), { withFileTypes: true })
    } catch (err) {
      if (errno(err) === 'ENOENT' || errno(err) === 'ENOTDIR') return
      throw this.fail(err, 'list', dir || '/')
    }
    // Sort as full paths would sort: a folder "a" holds paths "a/…", which sort after "a-b".
    const named = entries
      .filter((e) => !INTERNAL_NAME.test(e.name))
      .map((e) => ({ e, key: e.isDirectory() ? `${e.name}/` : e.name }))
      .sort((x, y) => (x.key < y.key ? -1 : x.key > y.key ? 1 : 0))
    for (const { e, key } of named) {
      const rel = dir + e.name
      if (e.isDirectory()) {
        const sub = dir + key
        if (recursive && (sub.startsWith(pre) || pre.startsWith(sub))) yield* this.walk(sub, pre, recursive)
        continue
      }
      if (!matchesPrefix(rel, pre, recursive)) continue
      const st = await statFile(this.abs(rel)).catch((err: unknown) => {
        throw this.fail(err, 'list', rel)
      })
      if (st) yield infoOf(rel, st)
    }
  }

  /**
   * Deletes temp files and locks under `prefix` that killed processes left
   * behind (a crash mid-write leaves the target intact but its temp file
   * remains). Returns the removed paths. Safe to run while others write: files
   * of live processes on this host are kept.
   */
  async removeOrphans(prefix = '', opts: RemoveOrphansOptions = {}): Promise<string[]> {
    const pre = checkPrefix(prefix, this.url)
    try {
      return await removeOrphanFiles(this.root, pre.slice(0, pre.lastIndexOf('/') + 1), opts)
    } catch (err) {
      throw this.fail(err, 'clean up', pre || '/')
    }
  }

  async stat(path: string): Promise<ObjectInfo | undefined> {
    const rel = checkPath(path, this.url)
    try {
      const st = await statFile(this.abs(rel))
      return st ? infoOf(rel, st) : undefined
    } catch (err) {
      throw this.fail(err, 'stat', rel)
    }
  }

  async exists(path: string): Promise<boolean> {
    return (await this.stat(path)) !== undefined
  }

  async delete(path: string, opts: DeleteOptions = {}): Promise<void> {
    const rel = checkPath(path, this.url)
    const target = this.abs(rel)
    const mismatch = (have: string) =>
      this.conditionFailed(rel, `is at generation ${have}, not ${opts.ifGeneration}; not deleted`)
    try {
      await withFileLock(
        target,
        async () => {
          const cur = await statFile(target)
          if (opts.ifGeneration !== undefined && (!cur || generationOf(cur) !== opts.ifGeneration)) {
            throw mismatch(cur ? generationOf(cur) : '(absent)')
          }
          if (!cur) return
          await unlink(target)
          if (opts.durable ?? true) await fsyncDir(dirname(target))
        },
        this.opts.lock,
      )
    } catch (err) {
      // The folder does not exist, so neither does the object.
      if (errno(err) === 'ENOENT' || errno(err) === 'ENOTDIR') {
        if (opts.ifGeneration !== undefined) throw mismatch('(absent)')
        return
      }
      throw this.fail(err, 'delete', rel)
    }
  }
}
