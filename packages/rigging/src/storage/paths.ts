/** @module Object-path validation shared by every storage backend. */
import { RiggingError } from '../errors.js'

/**
 * Checks an object path and returns it normalized (no leading `./`, no doubled `/`).
 * Paths are relative, `/`-separated, and never climb out of the storage root.
 *
 * @throws RiggingError('STORAGE_INVALID_PATH') naming the path and the rule it breaks.
 */
export function checkPath(path: string, storageUrl: string): string {
  const bad = (why: string): never => {
    throw new RiggingError(
      'STORAGE_INVALID_PATH',
      `storage ${storageUrl}: invalid object path ` +
        `${JSON.stringify(path)}: ${why}; use a relative path like ` +
        `"dir/name.json"`,
    )
  }
  if (typeof path !== 'string' || path.length === 0) bad('it is empty')
  if (path.includes('\0')) bad('it contains a NUL byte')
  if (path.includes('\\')) bad('it contains a backslash')
  if (path.startsWith('/')) bad('it is absolute')
  const parts = path.split('/').filter((p) => p !== '' && p !== '.')
  if (parts.length === 0) bad('it names the storage root, not an object')
  if (parts.includes('..')) bad('it contains ".."')
  if (path.endsWith('/')) bad('it ends with "/" (a folder, not an object)')
  return parts.join('/')
}

/**
 * Checks a list prefix: like a path, but it may be empty or end with `/`.
 * Returns the normalized prefix (a trailing `/` is kept).
 */
export function checkPrefix(prefix: string, storageUrl: string): string {
  if (prefix === '') return ''
  const trailing = prefix.endsWith('/')
  const body = trailing ? prefix.replace(/\/+$/, '') : prefix
  if (body === '' || body === '.') return ''
  const norm = checkPath(body, storageUrl)
  return trailing ? `${norm}/` : norm
}

/**
 * Whether `path` is listed under `prefix`; when not recursive, only objects
 * directly in the prefix's folder (no further `/` after the prefix's last `/`).
 */
export function matchesPrefix(path: string, prefix: string, recursive: boolean): boolean {
  if (!path.startsWith(prefix)) return false
  if (recursive) return true
  const folderEnd = prefix.lastIndexOf('/') + 1
  return !path.slice(folderEnd).includes('/')
}
