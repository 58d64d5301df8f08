/**
 * @module Local disk cache of blobs for remote storage: bounded in bytes,
 * least-recently-used eviction, every entry verified by its hash when it is
 * filled and again whenever it is read.
 *
 * Layout: `<dir>/ab/<hash>` plus `<dir>/.tmp/` for downloads in flight. Recency
 * is the file's mtime (bumped on every hit), so the order survives restarts and
 * is shared by processes that use the same directory.
 */
import { createReadStream, createWriteStream } from 'node:fs'
import { mkdir, readdir, rename, rm, stat, utimes } from 'node:fs/promises'
import { join } from 'node:path'
import type { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { FinestoreError } from './errors.js'
import { VerifyingTransform } from './internal/hashing.js'
import { newId } from './internal/ids.js'

export type BlobCacheOptions = {
  /** Directory of the cache; created when missing. */
  readonly dir: string
  /** Upper bound of the bytes kept; least recently used blobs are removed beyond it. */
  readonly maxBytes: number
}

export type CacheStats = {
  readonly entries: number
  readonly bytes: number
  readonly hits: number
  readonly misses: number
}

export class BlobCache {
  // Insertion order of a Map is the LRU order: the first key is the least recently used.
  readonly #entries = new Map<string, number>()
  readonly #inflight = new Map<string, Promise<string | undefined>>()
  #bytes = 0
  #hits = 0
  #misses = 0

  private constructor(
    readonly dir: string,
    readonly maxBytes: number,
  ) {}

  /** Opens (and indexes) the cache directory, removing downloads a dead process left behind. */
  static async open(opts: BlobCacheOptions): Promise<BlobCache> {
    if (!(opts.maxBytes > 0))
      throw new FinestoreError(
        'INVALID_INPUT',
        `cache maxBytes must be a positive number of bytes, got ${opts.maxBytes}`,
      )
    const cache = new BlobCache(opts.dir, opts.maxBytes)
    await rm(join(opts.dir, '.tmp'), { recursive: true, force: true })
    await mkdir(join(opts.dir, '.tmp'), { recursive: true })
    const found: { hash: string; size: number; mtimeMs: number }[] = []
    for (const sub of await readdir(opts.dir)) {
      if (!/^[0-9a-f]{2}$/.test(sub)) continue
      for (const name of await readdir(join(opts.dir, sub))) {
        if (!/^[0-9a-f]{64}$/.test(name)) continue
        const st = await stat(join(opts.dir, sub, name))
        found.push({ hash: name, size: st.size, mtimeMs: st.mtimeMs })
      }
    }
    for (const f of found.sort((a, b) => a.mtimeMs - b.mtimeMs)) cache.#add(f.hash, f.size)
    await cache.#evict()
    return cache
  }

  /** Where the cached copy of `hash` lives (whether or not it is there). */
  pathOf(hash: string): string {
    return join(this.dir, hash.slice(0, 2), hash)
  }

  stats(): CacheStats {
    return { entries: this.#entries.size, bytes: this.#bytes, hits: this.#hits, misses: this.#misses }
  }

  has(hash: string): boolean {
    return this.#entries.has(hash)
  }

  /**
   * The local path of a verified copy of `hash`, downloading it with `open` on a
   * miss. `undefined` when the blob is larger than the whole cache (read it directly).
   * A download whose bytes do not match throws `onMismatch`'s error and caches nothing.
   */
  async get(
    hash: string,
    size: number | undefined,
    open: () => Promise<Readable>,
    onMismatch: (actual: string, actualSize: number) => Error,
  ): Promise<string | undefined> {
    if (this.#entries.has(hash)) {
      this.#hits++
      this.#touch(hash)
      return this.pathOf(hash)
    }
    if (size !== undefined && size > this.maxBytes) return undefined
    const running = this.#inflight.get(hash)
    if (running) return running
    this.#misses++
    const p = this.#download(hash, size, open, onMismatch).finally(() => this.#inflight.delete(hash))
    this.#inflight.set(hash, p)
    return p
  }

  /** Drops one entry, e.g. after its bytes failed verification on read. */
  async remove(hash: string): Promise<void> {
    const size = this.#entries.get(hash)
    if (size === undefined) return
    this.#entries.delete(hash)
    this.#bytes -= size
    await rm(this.pathOf(hash), { force: true })
  }

  /** A stream of the cached copy that fails with `onMismatch` if the bytes changed on disk. */
  readStream(
    hash: string,
    size: number | undefined,
    onMismatch: (actual: string, actualSize: number) => Error,
  ): Readable {
    const verify = new VerifyingTransform(hash, size, onMismatch)
    const src = createReadStream(this.pathOf(hash))
    src.on('error', (err) => verify.destroy(err))
    return src.pipe(verify)
  }

  async #download(
    hash: string,
    size: number | undefined,
    open: () => Promise<Readable>,
    onMismatch: (a: string, s: number) => Error,
  ): Promise<string | undefined> {
    const tmp = join(this.dir, '.tmp', newId())
    try {
      const src = await open()
      const verify = new VerifyingTransform(hash, size, onMismatch)
      await pipeline(src, verify, createWriteStream(tmp))
      const st = await stat(tmp)
      if (st.size > this.maxBytes) return undefined
      const dest = this.pathOf(hash)
      await mkdir(join(this.dir, hash.slice(0, 2)), { recursive: true })
      await rename(tmp, dest)
      this.#add(hash, st.size)
      await this.#evict(hash)
      return dest
    } finally {
      await rm(tmp, { force: true })
    }
  }

  #add(hash: string, size: number): void {
    this.#entries.set(hash, size)
    this.#bytes += size
  }

  #touch(hash: string): void {
    const size = this.#entries.get(hash)!
    this.#entries.delete(hash)
    this.#entries.set(hash, size)
    const now = new Date()
    // Recency on disk is best effort: a lost update only makes eviction slightly less precise.
    utimes(this.pathOf(hash), now, now).catch(() => {})
  }

  async #evict(keep?: string): Promise<void> {
    for (const [hash, size] of this.#entries) {
      if (this.#bytes <= this.maxBytes) break
      if (hash === keep) continue
      this.#entries.delete(hash)
      this.#bytes -= size
      await rm(this.pathOf(hash), { force: true })
    }
  }
}
