/** @module A local file written whole or not at all: to a temp name beside it, flushed, then renamed. */
import { rename, writeFile } from 'node:fs/promises'

/** Writes `data` to `path` so that a reader sees either the old file or the whole new one. */
export async function atomicWrite(path: string, data: Uint8Array | string): Promise<void> {
  const tmp = `${path}.${process.pid}.${Date.now()}.tmp`
  await writeFile(tmp, data, { flush: true })
  await rename(tmp, path)
}
