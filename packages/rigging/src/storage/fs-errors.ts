/** @module Turns Node filesystem errors into `RiggingError`s that say what to do. */
import { RiggingError } from '../errors.js'

const errno = (err: unknown): string | undefined => (err as NodeJS.ErrnoException | undefined)?.code

/**
 * Maps an fs error raised while doing `op` on object `path` of storage `url`.
 * Permission and read-only errors become STORAGE_PERMISSION, a missing object
 * STORAGE_NOT_FOUND, everything else STORAGE_IO; the original error is the `cause`.
 */
export function fsError(err: unknown, op: string, path: string, url: string): RiggingError {
  if (err instanceof RiggingError) return err
  const code = errno(err)
  const where = `storage ${url}: cannot ${op} ${path}`
  const detail = (err as Error | undefined)?.message ?? String(err)
  switch (code) {
    case 'EACCES':
    case 'EPERM':
    case 'EROFS':
      return new RiggingError(
        'STORAGE_PERMISSION',
        `${where}: ${code === 'EROFS' ? 'the filesystem is read-only' : 'permission denied'} (${detail}); ` +
          'point the storage URL (e.g. MARIN_PREFIX) at a writable directory or fix its permissions',
        { cause: err },
      )
    case 'ENOENT':
      return new RiggingError('STORAGE_NOT_FOUND', `${where}: it does not exist (${detail})`, { cause: err })
    case 'ENOTDIR':
    case 'EISDIR':
    case 'EEXIST':
      return new RiggingError(
        'STORAGE_IO',
        `${where}: a file and a folder collide on this path (${detail}); ` +
          `an object path cannot also be a folder of other objects`,
        { cause: err },
      )
    case 'ENOSPC':
    case 'EDQUOT':
      return new RiggingError('STORAGE_IO', `${where}: the disk is full (${detail}); free space or move the storage`, {
        cause: err,
      })
    default:
      return new RiggingError('STORAGE_IO', `${where}: ${detail}`, { cause: err })
  }
}
