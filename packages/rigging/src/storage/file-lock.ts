/**
 * @module Cross-process mutual exclusion for one `file://` object.
 *
 * Every mutation of an object (write, conditional or not, and delete) holds the
 * object's lock file `.<name>.rigging-lock` in the same directory while it
 * checks the condition and renames the finished temp file into place. The lock
 * is taken with `open(O_CREAT | O_EXCL)`, which exactly one process wins on a
 * local filesystem. It is held only around the check-and-rename (never while
 * data streams in), so a holder keeps it for milliseconds.
 *
 * A holder that dies leaves its lock behind. The lock names its pid, host and
 * creation time; a waiter treats it as stale when that pid is gone on this
 * host, or when it is older than `staleMs` (for holders on other hosts, or a
 * lock file cut short by a crash). Breaking a stale lock is itself serialized by
 * a second O_EXCL file (`<lock>.break`) and re-checks that the lock still holds
 * the exact content judged stale, so two waiters cannot both break it and
 * delete a fresh lock taken in between.
 */
import { randomBytes } from 'node:crypto'
import { open, readFile, stat, unlink } from 'node:fs/promises'
import { hostname } from 'node:os'
import { basename, dirname, join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { RiggingError } from '../errors.js'

export type FileLockOptions = {
  /** A lock older than this is stale even if its holder looks alive. @default 30_000 */
  readonly staleMs?: number
  /** Give up waiting after this long. @default 60_000 */
  readonly timeoutMs?: number
}

type LockBody = { pid: number; host: string; token: string; at: number }

/** The lock file guarding `target` (an absolute file path). */
export function lockPathFor(target: string): string {
  return join(dirname(target), `.${basename(target)}.rigging-lock`)
}

const errno = (err: unknown): string | undefined => (err as NodeJS.ErrnoException | undefined)?.code

/** Whether a process with this pid exists on this host. */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return errno(err) === 'EPERM'
  }
}

/** Whether the lock file at `lockPath`, holding `raw`, is stale (see the module comment). */
export async function isStale(lockPath: string, raw: string, staleMs: number): Promise<boolean> {
  let body: LockBody | undefined
  try {
    body = JSON.parse(raw) as LockBody
  } catch {
    body = undefined
  }
  if (body && typeof body.pid === 'number' && body.host === hostname() && !pidAlive(body.pid)) return true
  const born = body && typeof body.at === 'number' ? body.at : (await stat(lockPath)).mtimeMs
  return Date.now() - born > staleMs
}

async function readOrUndefined(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, 'utf8')
  } catch (err) {
    if (errno(err) === 'ENOENT') return undefined
    throw err
  }
}

/** Breaks the lock if it still holds exactly `raw`; serialized by `<lock>.break`. */
async function breakStale(lockPath: string, raw: string, staleMs: number): Promise<void> {
  const breakPath = `${lockPath}.break`
  let fh
  try {
    fh = await open(breakPath, 'wx')
  } catch (err) {
    if (errno(err) !== 'EEXIST') throw err
    // Another waiter is breaking it; its break file is only left behind by a crash.
    const st = await stat(breakPath).catch(() => undefined)
    if (st && Date.now() - st.mtimeMs > staleMs) await unlink(breakPath).catch(() => undefined)
    return
  }
  try {
    await fh.close()
    if ((await readOrUndefined(lockPath)) === raw) await unlink(lockPath).catch(() => undefined)
  } finally {
    await unlink(breakPath).catch(() => undefined)
  }
}

/**
 * Runs `fn` while holding the lock of `target`. The directory of `target` must exist.
 * @throws RiggingError('STORAGE_IO') when the lock stays held past `timeoutMs`.
 */
export async function withFileLock<T>(target: string, fn: () => Promise<T>, opts: FileLockOptions = {}): Promise<T> {
  const { staleMs = 30_000, timeoutMs = 60_000 } = opts
  const lockPath = lockPathFor(target)
  const token = randomBytes(12).toString('hex')
  const body = JSON.stringify({ pid: process.pid, host: hostname(), token, at: Date.now() } satisfies LockBody)
  const deadline = Date.now() + timeoutMs
  let delay = 1
  for (;;) {
    try {
      const fh = await open(lockPath, 'wx')
      try {
        await fh.writeFile(body)
        await fh.close()
      } catch (err) {
        // A lock we could not fill in (e.g. a full disk) must not be left behind.
        await fh.close().catch(() => undefined)
        await unlink(lockPath).catch(() => undefined)
        throw err
      }
      break
    } catch (err) {
      if (errno(err) !== 'EEXIST') throw err
    }
    const raw = await readOrUndefined(lockPath)
    if (raw !== undefined && (await isStale(lockPath, raw, staleMs).catch(() => false))) {
      await breakStale(lockPath, raw, staleMs)
      continue
    }
    if (Date.now() > deadline) {
      throw new RiggingError(
        'STORAGE_IO',
        `lock ${lockPath} is still held after ${timeoutMs} ms (holder: ` +
          `${raw ?? 'unknown'}); if that process is gone, delete the lock file`,
      )
    }
    await sleep(delay * (0.5 + Math.random()))
    delay = Math.min(delay * 2, 50)
  }
  try {
    return await fn()
  } finally {
    // Only remove our own lock: if it was broken as stale, someone else may hold it now.
    if ((await readOrUndefined(lockPath).catch(() => undefined)) === body) await unlink(lockPath).catch(() => undefined)
  }
}
