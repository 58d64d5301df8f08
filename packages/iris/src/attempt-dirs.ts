/**
 * @module Attempt directories on a worker: `<workDir>/<job id>/<task>-<attempt>/`,
 * holding `work/` (the task's cwd), `stdout.log`, `stderr.log`, `attempt.json`
 * and, once the attempt ended, `.iris-finished`. Old ones are deleted after a TTL.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { removeTree } from './internal/tree.js'

/** The directory of one attempt. */
export function attemptDir(workDir: string, jobId: string, taskIndex: number, attempt: number): string {
  return join(workDir, jobId, `${taskIndex}-${attempt}`)
}

/**
 * Deletes attempt directories that ended more than `ttlMs` ago (by their
 * `.iris-finished` marker, else by mtime, which covers a worker that crashed),
 * skipping attempts still held. Returns how many were deleted.
 */
export function removeExpiredAttemptDirs(
  workDir: string,
  isHeld: (attemptId: string) => boolean,
  ttlMs: number,
  now = Date.now(),
): number {
  let removed = 0
  let jobs: string[]
  try {
    jobs = readdirSync(workDir)
  } catch {
    return 0
  }
  for (const job of jobs) {
    const jobDir = join(workDir, job)
    let entries: string[]
    try {
      entries = readdirSync(jobDir)
    } catch {
      continue
    }
    for (const e of entries) {
      const m = /^(\d+)-(\d+)$/.exec(e)
      if (!m || isHeld(`${job}/${m[1]}/${m[2]}`)) continue
      const dir = join(jobDir, e)
      const marker = join(dir, '.iris-finished')
      let endedAt: number
      try {
        endedAt = existsSync(marker)
          ? (JSON.parse(readFileSync(marker, 'utf8')) as { at: number }).at
          : statSync(dir).mtimeMs
      } catch {
        endedAt = statSync(dir).mtimeMs
      }
      if (now - endedAt < ttlMs) continue
      removeTree(dir)
      removed++
    }
    try {
      if (readdirSync(jobDir).length === 0) removeTree(jobDir)
    } catch {
      // Raced with a new attempt of the same job.
    }
  }
  return removed
}
