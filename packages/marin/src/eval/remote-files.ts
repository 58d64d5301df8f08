/** @module A checkpoint folder or tokenizer file that is an object in a storage URL (`s3://bucket/marin/<step>/hf`),
 * copied into a scratch folder under this machine's folder of the prefix, for the model loaders that read local files.
 * A local path (or `file://` URL) is used where it is; an artifact reference (`models/<name>@v`) is no URL and is
 * left to the store. */
import { createHash, randomBytes } from 'node:crypto'
import { mkdir, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { openStorage, prefixDir } from '@marin/rigging'
import { MarinError } from '../errors.js'

const URL_SCHEME = /^[a-zA-Z][a-zA-Z0-9+.-]*:\/\//

/**
 * This machine's folder of a prefix that is not local: `<tmpdir>/marin-prefix-<hash>`, `<hash>` the first 16 hex
 * digits of the SHA-256 of its URL (the folder datakit's store keeps its work and copies in).
 */
export function prefixScratchDir(prefixUrl: string): string {
  return join(tmpdir(), `marin-prefix-${createHash('sha256').update(prefixUrl).digest('hex').slice(0, 16)}`)
}

/** Local copies of remote inputs; `remove` deletes every copy made. */
export type LocalCopies = {
  /** `path` when it is local or not a URL; else a local copy of the object (`file`) or of every object under it. */
  local(path: string, what: 'folder' | 'file', field: string): Promise<string>
  remove(): Promise<void>
}

/** Copies remote inputs into `<prefixScratchDir(prefix)>/eval-inputs/<random>/`. */
export function localCopies(prefix: string): LocalCopies {
  const base = join(prefixScratchDir(prefix), 'eval-inputs', `${process.pid}-${randomBytes(4).toString('hex')}`)
  let used = false
  return {
    async local(path, what, field) {
      if (!URL_SCHEME.test(path)) return path
      const dir = prefixDir(path)
      if (dir !== undefined) return dir
      used = true
      const into = join(base, createHash('sha256').update(path).digest('hex').slice(0, 16))
      const trimmed = path.replace(/\/+$/, '')
      try {
        if (what === 'file') {
          const cut = trimmed.lastIndexOf('/')
          const name = trimmed.slice(cut + 1)
          const bytes = await (await openStorage(trimmed.slice(0, cut))).read(name)
          await mkdir(into, { recursive: true })
          await writeFile(join(into, name), bytes)
          return join(into, name)
        }
        const storage = await openStorage(trimmed)
        let count = 0
        for await (const o of storage.list('')) {
          const file = join(into, ...o.path.split('/'))
          await mkdir(dirname(file), { recursive: true })
          await writeFile(file, await storage.read(o.path))
          count++
        }
        if (count === 0) throw new Error('no objects under it')
        return into
      } catch (err) {
        throw new MarinError(
          'BAD_CONFIG',
          `${field}: cannot copy ${path} to this machine (${(err as Error).message}); ` +
            `give a ${what} that exists (config.json + model.safetensors for a checkpoint) or an artifact reference`,
          { cause: err },
        )
      }
    },
    async remove() {
      if (used) await rm(base, { recursive: true, force: true })
    },
  }
}
