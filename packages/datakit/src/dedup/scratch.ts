/**
 * @module Where out-of-core dedup keeps its signature buckets, pairs and lengths: a local folder (every worker on
 * this machine), or a storage URL (`s3://bucket/prefix`, `gs://…`) that workers on other hosts reach with no disk
 * shared. For a URL, the files a worker appends to are written in a temp folder of its own and stored when done.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { isRiggingError, openStorage } from '@marin/rigging'

export type Scratch = {
  /** A local folder files are appended in: the scratch itself, or (for a URL) a temp folder of this process. */
  readonly local: string
  /** Makes `name`, a file written in `local`, part of the scratch (for a URL: stored, then removed locally). */
  commit(name: string): Promise<void>
  write(name: string, bytes: Uint8Array): Promise<void>
  /** The bytes of `name`, or undefined when there is no such file. */
  read(name: string): Promise<Uint8Array | undefined>
  /** Removes every file of the scratch (it stays usable). */
  clear(): Promise<void>
  /** Removes this process's temp folder (for a URL); the scratch's files stay. */
  release(): void
  /** Removes the scratch: its files, and the folder itself when local. */
  remove(): Promise<void>
}

/** A URL of a storage other than the local filesystem. */
export const isStorageUrl = (dir: string): boolean => /^[a-z][a-z0-9+.-]*:\/\//i.test(dir) && !/^file:/i.test(dir)

export async function openScratch(dir: string): Promise<Scratch> {
  if (!isStorageUrl(dir))
    return {
      local: dir,
      commit: async () => {},
      write: (name, bytes) => writeFile(join(dir, name), bytes),
      read: (name) =>
        readFile(join(dir, name)).catch((e: NodeJS.ErrnoException) => {
          if (e.code === 'ENOENT') return undefined
          throw e
        }),
      clear: async () => {
        await rm(dir, { recursive: true, force: true })
        await mkdir(dir, { recursive: true })
      },
      release: () => {},
      remove: () => rm(dir, { recursive: true, force: true }),
    }
  const storage = await openStorage(dir.endsWith('/') ? dir : `${dir}/`)
  let local: string | undefined
  const scratch: Scratch = {
    get local() {
      local ??= mkdtempSync(join(tmpdir(), 'datakit-dedup-'))
      return local
    },
    async commit(name) {
      const path = join(scratch.local, name)
      await storage.write(name, await readFile(path))
      await rm(path, { force: true })
    },
    write: async (name, bytes) => void (await storage.write(name, bytes)),
    read: (name) =>
      storage.read(name).catch((e: unknown) => {
        if (isRiggingError(e, 'STORAGE_NOT_FOUND')) return undefined
        throw e
      }),
    async clear() {
      const names: string[] = []
      for await (const info of storage.list('')) names.push(info.path)
      for (const name of names) await storage.delete(name)
    },
    release() {
      if (local !== undefined) rmSync(local, { recursive: true, force: true })
      local = undefined
    },
    async remove() {
      await scratch.clear()
      scratch.release()
    },
  }
  return scratch
}
