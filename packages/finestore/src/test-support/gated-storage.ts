/** @module Test helper: a real storage whose `list` of chosen prefixes waits at a gate, to stop gc at a chosen step. */
import type { ListOptions, ObjectInfo, Storage, WriteOptions } from '@marin/rigging'

export class GatedStorage implements Storage {
  #gates = new Map<string, { reached: () => void; wait: Promise<void> }>()

  constructor(readonly inner: Storage) {}

  get url(): string {
    return this.inner.url
  }

  /** The next `list(prefix)` pauses until `open()` is called; `reached` resolves when it pauses. */
  gate(prefix: string): { reached: Promise<void>; open: () => void } {
    let reached!: () => void
    let open!: () => void
    const r = new Promise<void>((res) => (reached = res))
    const wait = new Promise<void>((res) => (open = res))
    this.#gates.set(prefix, { reached, wait })
    return { reached: r, open }
  }

  async *list(prefix = '', opts?: ListOptions): AsyncIterable<ObjectInfo> {
    const g = this.#gates.get(prefix)
    if (g) {
      this.#gates.delete(prefix)
      g.reached()
      await g.wait
    }
    yield* this.inner.list(prefix, opts)
  }

  read(path: string) {
    return this.inner.read(path)
  }
  readText(path: string) {
    return this.inner.readText(path)
  }
  write(path: string, data: Uint8Array | string, opts?: WriteOptions) {
    return this.inner.write(path, data, opts)
  }
  readStream(path: string, range?: { start?: number; end?: number }) {
    return this.inner.readStream(path, range)
  }
  writeStream(path: string, opts?: WriteOptions) {
    return this.inner.writeStream(path, opts)
  }
  stat(path: string) {
    return this.inner.stat(path)
  }
  exists(path: string) {
    return this.inner.exists(path)
  }
  delete(path: string, opts?: { readonly ifGeneration?: string }) {
    return this.inner.delete(path, opts)
  }
  localPath(path: string) {
    return this.inner.localPath(path)
  }
}
