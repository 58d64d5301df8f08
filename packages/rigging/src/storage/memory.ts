/**
 * @module `memory://<name>`: a process-wide named in-memory store. Two
 * `openStorage('memory://x')` calls see the same objects; used by tests and
 * by code that wants storage semantics without touching disk.
 */
import { Readable, Writable } from 'node:stream'
import { RiggingError } from '../errors.js'
import { checkPath, checkPrefix, matchesPrefix } from './paths.js'
import type { DeleteOptions, ListOptions, ObjectInfo, Storage, WriteCondition, WriteOptions } from './types.js'

type Entry = { readonly data: Uint8Array; readonly mtimeMs: number; readonly generation: string }

const stores = new Map<string, Map<string, Entry>>()
// One counter for every memory store: a generation is never reused, even after delete.
let nextGeneration = 1

const toBytes = (data: Uint8Array | string): Uint8Array =>
  typeof data === 'string' ? new TextEncoder().encode(data) : new Uint8Array(data)

const info = (path: string, e: Entry): ObjectInfo => ({
  path,
  size: e.data.byteLength,
  mtimeMs: e.mtimeMs,
  generation: e.generation,
})

/** In-memory storage; see the module comment. */
export class MemoryStorage implements Storage {
  readonly url: string
  private readonly objects: Map<string, Entry>

  constructor(readonly name: string) {
    this.url = `memory://${name}`
    let objects = stores.get(name)
    if (!objects) stores.set(name, (objects = new Map()))
    this.objects = objects
  }

  /** Drops every object of the named store (tests use it to start clean). */
  static clear(name: string): void {
    stores.get(name)?.clear()
  }

  private get(path: string): Entry {
    const p = checkPath(path, this.url)
    const e = this.objects.get(p)
    if (!e) throw new RiggingError('STORAGE_NOT_FOUND', `storage ${this.url}: object ${p} does not exist`)
    return e
  }

  async read(path: string): Promise<Uint8Array> {
    return new Uint8Array(this.get(path).data)
  }

  async readText(path: string): Promise<string> {
    return new TextDecoder().decode(this.get(path).data)
  }

  private put(path: string, data: Uint8Array, condition: WriteCondition | undefined): ObjectInfo {
    const p = checkPath(path, this.url)
    this.check(p, condition)
    const e: Entry = { data, mtimeMs: Date.now(), generation: String(nextGeneration++) }
    this.objects.set(p, e)
    return info(p, e)
  }

  private check(p: string, condition: WriteCondition | undefined): void {
    const cur = this.objects.get(p)
    if (condition && 'ifAbsent' in condition && cur) {
      throw new RiggingError(
        'STORAGE_CONDITION_FAILED',
        `storage ${this.url}: ${p} already exists (write with ifAbsent)`,
      )
    }
    if (condition && 'ifGeneration' in condition && cur?.generation !== condition.ifGeneration) {
      throw new RiggingError(
        'STORAGE_CONDITION_FAILED',
        `storage ${this.url}: ${p} is at generation ` +
          `${cur?.generation ?? '(absent)'}, not ${condition.ifGeneration}` +
          `; re-read it and retry`,
      )
    }
  }

  async write(path: string, data: Uint8Array | string, opts: WriteOptions = {}): Promise<ObjectInfo> {
    return this.put(path, toBytes(data), opts.condition)
  }

  /** Shares the bytes (objects are never changed in place) under a new generation. */
  async copy(from: string, to: string, opts: WriteOptions = {}): Promise<ObjectInfo> {
    return this.put(to, this.get(from).data, opts.condition)
  }

  async rename(from: string, to: string, opts: WriteOptions = {}): Promise<ObjectInfo> {
    const src = checkPath(from, this.url)
    const e = this.get(src)
    const p = checkPath(to, this.url)
    if (src === p) {
      this.check(p, opts.condition)
      return info(p, e)
    }
    const moved = this.put(p, e.data, opts.condition)
    this.objects.delete(src)
    return moved
  }

  async readStream(path: string, range: { start?: number; end?: number } = {}): Promise<Readable> {
    const data = this.get(path).data
    return Readable.from([Buffer.from(data.subarray(range.start ?? 0, range.end ?? data.byteLength))])
  }

  async writeStream(path: string, opts: WriteOptions = {}): Promise<Writable> {
    checkPath(path, this.url)
    const chunks: Buffer[] = []
    return new Writable({
      write(chunk: Buffer | string, _enc, cb) {
        chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk))
        cb()
      },
      // Nothing is visible until final(); a destroyed stream never reaches it.
      final: (cb) => {
        try {
          this.put(path, new Uint8Array(Buffer.concat(chunks)), opts.condition)
          cb()
        } catch (err) {
          cb(err as Error)
        }
      },
    })
  }

  async *list(prefix = '', opts: ListOptions = {}): AsyncIterable<ObjectInfo> {
    const pre = checkPrefix(prefix, this.url)
    const recursive = opts.recursive ?? true
    const paths = [...this.objects.keys()].filter((p) => matchesPrefix(p, pre, recursive)).sort()
    for (const p of paths) {
      const e = this.objects.get(p)
      if (e) yield info(p, e)
    }
  }

  async stat(path: string): Promise<ObjectInfo | undefined> {
    const p = checkPath(path, this.url)
    const e = this.objects.get(p)
    return e ? info(p, e) : undefined
  }

  async exists(path: string): Promise<boolean> {
    return (await this.stat(path)) !== undefined
  }

  async delete(path: string, opts: DeleteOptions = {}): Promise<void> {
    const p = checkPath(path, this.url)
    const cur = this.objects.get(p)
    if (opts.ifGeneration !== undefined && cur?.generation !== opts.ifGeneration) {
      throw new RiggingError(
        'STORAGE_CONDITION_FAILED',
        `storage ${this.url}: ${p} is at generation ` +
          `${cur?.generation ?? '(absent)'}, not ${opts.ifGeneration}; not deleted`,
      )
    }
    this.objects.delete(p)
  }

  localPath(): string | undefined {
    return undefined
  }
}
