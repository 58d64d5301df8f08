/**
 * @module The storage of a store opened with `fsync: false`: every write, move
 * and delete passes `durable: false`, so nothing waits for the disk. Objects
 * still appear atomically and conditions still hold; a power loss may lose
 * recent commits. For scratch and temporary stores only.
 */
import type { Readable, Writable } from 'node:stream'
import type { ListOptions, ObjectInfo, Storage, WriteOptions } from '@marin/rigging'

type DeleteOptions = Parameters<Storage['delete']>[1]

export class ScratchStorage implements Storage {
  readonly copy?: Storage['copy']
  readonly rename?: Storage['rename']

  constructor(readonly inner: Storage) {
    // Only what the inner storage can do, so that callers still fall back where it cannot.
    if (inner.copy) this.copy = (from, to, opts) => inner.copy!(from, to, { ...opts, durable: false })
    if (inner.rename) this.rename = (from, to, opts) => inner.rename!(from, to, { ...opts, durable: false })
  }

  get url(): string {
    return this.inner.url
  }
  read(path: string): Promise<Uint8Array> {
    return this.inner.read(path)
  }
  readText(path: string): Promise<string> {
    return this.inner.readText(path)
  }
  write(path: string, data: Uint8Array | string, opts?: WriteOptions): Promise<ObjectInfo> {
    return this.inner.write(path, data, { ...opts, durable: false })
  }
  readStream(path: string, range?: { start?: number; end?: number }): Promise<Readable> {
    return this.inner.readStream(path, range)
  }
  writeStream(path: string, opts?: WriteOptions): Promise<Writable> {
    return this.inner.writeStream(path, { ...opts, durable: false })
  }
  list(prefix?: string, opts?: ListOptions): AsyncIterable<ObjectInfo> {
    return this.inner.list(prefix, opts)
  }
  stat(path: string): Promise<ObjectInfo | undefined> {
    return this.inner.stat(path)
  }
  exists(path: string): Promise<boolean> {
    return this.inner.exists(path)
  }
  delete(path: string, opts?: DeleteOptions): Promise<void> {
    return this.inner.delete(path, { ...opts, durable: false })
  }
  localPath(path: string): string | undefined {
    return this.inner.localPath(path)
  }
}
