/**
 * @module `--mount ARTIFACT[@VERSION]:path`: materializes a finestore artifact
 * version read-only in a task's directory before the task starts.
 */
import { existsSync, mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { openStore, type Store } from '@marin/finestore'
import { IrisError } from './errors.js'
import { makeReadOnly } from './internal/tree.js'
import type { Mount } from './mount-spec.js'
import type { MountMaterializer } from './worker.js'

/** The ref string finestore reads: `name`, `name@3` or `name@tag`. */
export function mountRef(m: Mount): string {
  return m.version === undefined ? m.artifact : `${m.artifact}@${m.version}`
}

/**
 * A materializer over the store at `storeUrl` (opened on first use). Every file
 * of the version is copied (verified against its hash) under `dest`, then the
 * tree is made read-only.
 * @example
 * new Worker({ ..., materialize: finestoreMounts('file:///data/.marin/store') })
 */
export function finestoreMounts(storeUrl: string): MountMaterializer {
  let store: Promise<Store> | undefined
  return async (mount, dest) => {
    if (existsSync(dest))
      throw new IrisError(
        'MOUNT_FAILED',
        `mount ${mountRef(mount)}: ${mount.path} already exists in the task directory; mount each path once`,
      )
    store ??= openStore({ url: storeUrl }).catch((err: unknown) => {
      store = undefined
      throw err
    })
    try {
      const view = await (await store).open(mountRef(mount))
      for (const f of view.files()) await view.copyTo(f, join(dest, f))
      if (view.files().length === 0) mkdirSync(dest, { recursive: true })
    } catch (err) {
      throw new IrisError('MOUNT_FAILED', `mount ${mountRef(mount)} from ${storeUrl}: ${(err as Error).message}`, {
        cause: err,
      })
    }
    makeReadOnly(dest)
  }
}
