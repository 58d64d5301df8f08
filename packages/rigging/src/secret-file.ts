/** @module Writing secret files: owner-only (0600) from the first byte, replaced atomically. */
import { randomBytes } from 'node:crypto'
import { chmodSync, closeSync, fsyncSync, mkdirSync, openSync, renameSync, rmSync, writeSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { homedir } from 'node:os'
import { RiggingError } from './errors.js'

/**
 * Writes `value` to `path` with mode 0600 (its directory, when created, gets 0700).
 * The file is created 0600 before any byte is written, so the secret is never readable by
 * others even for a moment, and it replaces an older file atomically by rename.
 * @example writeSecretFile('~/.marin/secrets/openai_api_key', key)
 */
export function writeSecretFile(path: string, value: string): void {
  const target = path === '~' || path.startsWith('~/') ? join(homedir(), path.slice(1)) : path
  const tmp = join(dirname(target), `.${randomBytes(6).toString('hex')}.tmp`)
  try {
    mkdirSync(dirname(target), { recursive: true, mode: 0o700 })
    const fd = openSync(tmp, 'wx', 0o600)
    try {
      // The umask can only remove bits; chmod anyway so the mode is exactly 0600.
      chmodSync(tmp, 0o600)
      writeSync(fd, value.endsWith('\n') ? value : `${value}\n`)
      fsyncSync(fd)
    } finally {
      closeSync(fd)
    }
    renameSync(tmp, target)
  } catch (err) {
    try {
      rmSync(tmp, { force: true })
    } catch {
      // The directory itself may be what failed; there is then no temp file to remove.
    }
    const code = (err as NodeJS.ErrnoException).code ?? 'error'
    throw new RiggingError(
      'SECRET_WRITE_FAILED',
      `cannot write secret file ${target} (${code}); check that its directory is writable`,
      { cause: err },
    )
  }
}
