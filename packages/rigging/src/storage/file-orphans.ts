/**
 * @module Names of the hidden files `file://` storage keeps next to objects, and
 * removal of the ones a killed process left behind.
 *
 * A temp file is named `.<name>.rigging-tmp-<host>-<pid>-<random>` (host = a
 * short hash of the hostname), so that anyone can tell whether its writer is
 * still alive. A crash leaves it (the target is untouched); `removeOrphans`
 * deletes temp files whose writer is gone and lock files whose holder is gone.
 */
import { createHash, randomBytes } from 'node:crypto'
import { readdir, readFile, stat, unlink } from 'node:fs/promises'
import { hostname } from 'node:os'
import { basename, dirname, join } from 'node:path'
import { isStale, pidAlive } from './file-lock.js'

/** Temp, lock and lock-break files: never listed as objects. */
export const INTERNAL_NAME = /^\..*\.rigging-(tmp-[0-9a-f]+(-\d+-[0-9a-f]+)?|lock|lock\.break)$/

const TEMP_NAME = /\.rigging-tmp-([0-9a-f]{6})-(\d+)-[0-9a-f]+$/
const hostTag = createHash('sha256').update(hostname()).digest('hex').slice(0, 6)

/** A fresh temp path next to `target` (an absolute file path). */
export function tempPathFor(target: string): string {
  return join(
    dirname(target),
    `.${basename(target)}.rigging-tmp-${hostTag}-${process.pid}-${randomBytes(6).toString('hex')}`,
  )
}

export type RemoveOrphansOptions = {
  /**
   * Files from other hosts (whose pids we cannot check) count as orphans once
   * older than this. @default 3_600_000 (one hour)
   */
  readonly olderThanMs?: number
}

/** Whether the hidden file `name` in `dir` was left by a process that is gone. */
async function orphaned(dir: string, name: string, olderThanMs: number): Promise<boolean> {
  const path = join(dir, name)
  if (name.endsWith('.rigging-lock')) {
    const raw = await readFile(path, 'utf8').catch(() => undefined)
    return raw !== undefined && (await isStale(path, raw, olderThanMs).catch(() => false))
  }
  const m = TEMP_NAME.exec(name)
  if (m && m[1] === hostTag) return !pidAlive(Number(m[2]))
  const st = await stat(path).catch(() => undefined)
  return st !== undefined && Date.now() - st.mtimeMs > olderThanMs
}

/**
 * Deletes the temp and lock files under `dir` (recursively) that were left by
 * processes that no longer run. Returns their paths relative to `root`.
 */
export async function removeOrphanFiles(root: string, dir: string, opts: RemoveOrphansOptions = {}): Promise<string[]> {
  const olderThanMs = opts.olderThanMs ?? 3_600_000
  const removed: string[] = []
  const walk = async (rel: string): Promise<void> => {
    const abs = join(root, rel)
    const entries = await readdir(abs, { withFileTypes: true }).catch(() => [])
    for (const e of entries) {
      if (e.isDirectory()) await walk(rel + e.name + '/')
      else if (INTERNAL_NAME.test(e.name) && !e.name.endsWith('.break') && (await orphaned(abs, e.name, olderThanMs))) {
        await unlink(join(abs, e.name)).then(
          () => removed.push(rel + e.name),
          () => undefined,
        )
      }
    }
  }
  await walk(dir)
  return removed.sort()
}
