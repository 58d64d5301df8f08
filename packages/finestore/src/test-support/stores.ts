/** @module Test helpers: a fresh store on a real temp directory or a fresh in-memory storage. */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { randomBytes } from 'node:crypto'
import { openStore, type Store, type StoreOptions } from '../store.js'

export type Backend = 'file' | 'memory'
export const BACKENDS: readonly Backend[] = ['file', 'memory']

export type TestStore = { store: Store; url: string; dir: string; cleanup: () => void }

/** A temp directory removed by `cleanup`. */
export function tempDir(prefix = 'finestore-'): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) }
}

/** Opens a new, empty store on `backend` (file: a temp directory; memory: a unique name). */
export async function newStore(backend: Backend, opts: Omit<StoreOptions, 'url' | 'storage'> = {}): Promise<TestStore> {
  const { dir, cleanup } = tempDir()
  const url =
    backend === 'file'
      ? pathToFileURL(join(dir, 'store')).href
      : `memory://finestore-test-${randomBytes(6).toString('hex')}`
  const t: TestStore = {
    store: await openStore({ url, ...opts }),
    url,
    dir,
    cleanup: () => {
      t.store.close()
      cleanup()
    },
  }
  return t
}

/** The paths a store's storage holds under `prefix` (e.g. `tmp/`, `txns/`). */
export async function listedPaths(store: Store, prefix: string): Promise<string[]> {
  const out: string[] = []
  for await (const o of store.storage.list(prefix)) out.push(o.path)
  return out
}
