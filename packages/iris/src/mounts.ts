/**
 * @module `--mount ARTIFACT[@VERSION]:path`: materializes a finestore artifact
 * version read-only in a task's directory before the task starts.
 */
import { existsSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { openStore, type Store } from '@marin/finestore'
import { IrisError } from './errors.js'
import { makeReadOnly } from './internal/tree.js'
import { checkMountPath, type Mount } from './mount-spec.js'
import type { MountMaterializer } from './worker.js'

/** The ref string finestore reads: `name`, `name@3` or `name@tag`. */
export function mountRef(m: Mount): string {
  return m.version === undefined ? m.artifact : `${m.artifact}@${m.version}`
}

/**
 * A materializer over the store at `storeUrl` (opened on first use). Every file
 * of the version is copied (verified against its hash) under `dest`, then the
 * tree is made read-only. A version whose paths would leave `dest`, or a link on
 * the way from the task directory, fails the mount before anything is written.
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
      // The paths come from a manifest anyone with write access to the store may have written: finestore checks
      // them all, and the folders from the task directory down, before it writes the first file.
      await view.materialize(dest, { within: taskDirOf(mount, dest) })
    } catch (err) {
      throw new IrisError('MOUNT_FAILED', `mount ${mountRef(mount)} from ${storeUrl}: ${(err as Error).message}`, {
        cause: err,
      })
    }
    makeReadOnly(dest)
  }
}

/** The task directory: the worker puts a mount at `join(taskDir, checkMountPath(path))`, so it is `dest` less that. */
function taskDirOf(mount: Mount, dest: string): string {
  const segments = checkMountPath(mount.path)
    .split('/')
    .filter((s) => s !== '')
  const up = resolve(dest, ...segments.map(() => '..'))
  return join(up, ...segments) === resolve(dest) ? up : resolve(dest)
}
