/**
 * @module A step's output, staged and then published. The step function writes
 * into a staging folder of its own attempt, `<step>/.staging/<attempt>/<name_hash8>`
 * (named like the step folder, for steps that name things after their folder);
 * the runner moves it into the step folder only after `fence()` proved it still
 * holds the step's lease, and then writes SUCCESS, or FAILED (a failed run's
 * partial output explains its failure), conditionally: see `step-runner.ts`.
 * Dependents start only on SUCCESS, so they see a complete output, and a run
 * that lost its lease never touches the published one.
 *
 * On a local prefix each top-level entry moves with one rename (a folder appears
 * whole); entries of the previous output that the new one lacks are removed. On
 * an object store each object moves on its own.
 */
import { randomBytes } from 'node:crypto'
import { existsSync } from 'node:fs'
import { lstat, mkdir, readdir, rename, rm, rmdir } from 'node:fs/promises'
import { basename, join } from 'node:path'
import type { Storage } from '@marin/rigging'
import { MarinError } from '../errors.js'

export const STAGING = '.staging'

/** Names in a step folder that belong to the executor, not to the step's output. */
export function isExecutorEntry(name: string): boolean {
  return name === 'logs' || name === STAGING || name.startsWith('.executor_') || name.includes('.rigging-')
}

/** One attempt's staging folder: `rel` inside the prefix, `outputPath` as the step function sees it. */
export type Staging = {
  readonly nameHash: string
  readonly attemptRel: string
  readonly rel: string
  readonly outputPath: string
}

/** A fresh staging folder for the step whose output is at `outputPath` (a local folder or a URL). */
export function newStaging(storage: Storage, nameHash: string, outputPath: string): Staging {
  const attempt = `${new Date().toISOString().replace(/[:.]/g, '-')}-${process.pid}-${randomBytes(3).toString('hex')}`
  const inner = `${STAGING}/${attempt}/${basename(nameHash)}`
  const rel = `${nameHash}/${inner}`
  return {
    nameHash,
    attemptRel: `${nameHash}/${STAGING}/${attempt}`,
    rel,
    outputPath: storage.localPath(rel) ?? `${outputPath.replace(/\/+$/, '')}/${inner}`,
  }
}

/** Removes the staging folders of other attempts (runs that died or lost the lease); call it holding the lease. */
export async function clearOtherStaging(storage: Storage, s: Staging): Promise<void> {
  const local = storage.localPath(`${s.nameHash}/${STAGING}`)
  if (local) {
    const names = existsSync(local) ? await readdir(local) : []
    await Promise.all(
      names
        .filter((n) => `${s.nameHash}/${STAGING}/${n}` !== s.attemptRel)
        .map((n) => rm(join(local, n), { recursive: true, force: true })),
    )
    return
  }
  for await (const o of storage.list(`${s.nameHash}/${STAGING}/`)) {
    if (!o.path.startsWith(`${s.attemptRel}/`)) await storage.delete(o.path)
  }
}

/** Removes this attempt's staging folder. */
export async function discardStaging(storage: Storage, s: Staging): Promise<void> {
  const local = storage.localPath(s.attemptRel)
  if (local) {
    await rm(local, { recursive: true, force: true })
    await rmdir(storage.localPath(`${s.nameHash}/${STAGING}`)!).catch(() => {}) // only once empty
    return
  }
  for await (const o of storage.list(`${s.attemptRel}/`)) await storage.delete(o.path)
}

const reservedError = (s: Staging, name: string) =>
  new MarinError(
    'STEP_FAILED',
    `step ${s.nameHash} wrote "${name}" into its output, a name the ` +
      `executor keeps for its own files (logs/, .executor_*, ${STAGING}` +
      `/); write it under another name`,
  )

/**
 * Moves the staged output into the step folder, replacing the previous output.
 * Call it right after `lease.fence()`; the SUCCESS write that follows is what
 * makes the output visible to dependents.
 */
export async function publishOutput(storage: Storage, s: Staging): Promise<void> {
  const from = storage.localPath(s.rel)
  if (from) {
    const to = storage.localPath(s.nameHash)!
    const replaced = storage.localPath(`${s.attemptRel}/replaced`)!
    const staged = existsSync(from) ? await readdir(from) : []
    const bad = staged.find(isExecutorEntry)
    if (bad) throw reservedError(s, bad)
    await mkdir(replaced, { recursive: true })
    const current = (await readdir(to)).filter((n) => !isExecutorEntry(n))
    // The previous output's folders move aside first (a rename cannot replace a folder); files are replaced in one
    // rename.
    for (const name of current) {
      if (!staged.includes(name) || (await isDir(join(to, name)))) await rename(join(to, name), join(replaced, name))
    }
    for (const name of staged) await rename(join(from, name), join(to, name))
    return
  }
  const prefix = `${s.rel}/`
  const fresh = new Set<string>()
  for await (const o of storage.list(prefix)) fresh.add(o.path.slice(prefix.length))
  const bad = [...fresh].map((rel) => rel.split('/')[0]!).find(isExecutorEntry)
  if (bad) throw reservedError(s, bad)
  for (const rel of fresh) {
    const from = `${prefix}${rel}`
    const target = `${s.nameHash}/${rel}`
    if (storage.rename) await storage.rename(from, target)
    else if (storage.copy) {
      await storage.copy(from, target)
      await storage.delete(from)
    } else {
      await storage.write(target, await storage.read(from))
      await storage.delete(from)
    }
  }
  const stale: string[] = []
  for await (const o of storage.list(`${s.nameHash}/`)) {
    const rel = o.path.slice(s.nameHash.length + 1)
    if (!isExecutorEntry(rel.split('/')[0]!) && !fresh.has(rel)) stale.push(o.path)
  }
  for (const p of stale) await storage.delete(p)
}

const isDir = async (p: string) => (await lstat(p)).isDirectory()
