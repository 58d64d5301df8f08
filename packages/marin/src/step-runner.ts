/**
 * @module Running one step where we are (the executor's process with `--local`,
 * or an iris job's process): take the step's lease, mark it RUNNING, call its
 * function, mark SUCCESS or FAILED, give the lease back.
 *
 * The lease is what makes concurrent runs safe: of two processes that reach the
 * same step, one gets the lease and runs it; the other waits until the lease is
 * released (then sees SUCCESS and skips) or expires (its holder died: it takes over).
 */
import { fileURLToPath } from 'node:url'
import { Lease, isRiggingError, provenance, readLease, type Storage } from '@marin/rigging'
import { logger } from '@marin/rigging'
import { lockPath, readStatus, recordHistory, writeInfo, writeStatus, type StepInfo } from './status-files.js'
import { openStepLog } from './step-log.js'
import type { Step } from './step.js'
import type { StepVersion } from './version.js'

const log = logger('marin')
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

export type RunStepOptions = {
  readonly storage: Storage
  readonly step: Step
  readonly version: StepVersion
  /** The config the function receives (dependency outputs as paths). */
  readonly config: unknown
  /** Where the function writes. */
  readonly outputPath: string
  readonly leaseTtlMs: number
  /** Lease owner; a parent that passes its id to a child can later clean up after it. */
  readonly owner?: string
  /** Run even if the step is already SUCCESS (unless another run just finished it while we waited). */
  readonly force?: boolean
  /** Name of the log file in `logs/`. @default `<time>-<pid>.log` */
  readonly logName?: string
}

export type StepResult = {
  readonly status: 'SUCCESS' | 'FAILED' | 'SKIPPED'
  readonly detail?: string
  readonly error?: string
  readonly startedAt: string
  readonly finishedAt: string
}

/**
 * Waits while someone else holds a live lease on the step. Resolves true if it
 * had to wait. A lease that expires without release is left for `Lease.acquire` to take over.
 */
export async function waitForLease(storage: Storage, nameHash: string, ttlMs: number, signal?: AbortSignal): Promise<boolean> {
  let waited = false
  const poll = Math.max(20, Math.min(500, Math.floor(ttlMs / 5)))
  for (;;) {
    signal?.throwIfAborted()
    const cur = await readLease(storage, lockPath(nameHash))
    if (!cur?.record || cur.record.expiresAt <= Date.now()) return waited
    if (!waited) log.info({ step: nameHash, owner: cur.record.owner }, 'step is running elsewhere; waiting for it')
    waited = true
    await sleep(poll)
  }
}

/** Runs the step here under its lease; see the module comment. Never throws for a failing step function. */
export async function runStepHere(o: RunStepOptions): Promise<StepResult> {
  const { storage, version } = o
  const nameHash = version.nameHash
  const startedAt = new Date().toISOString()
  let waited = false
  let lease: Lease | undefined
  for (;;) {
    waited = (await waitForLease(storage, nameHash, o.leaseTtlMs)) || waited
    lease = await Lease.tryAcquire(storage, lockPath(nameHash), { ttlMs: o.leaseTtlMs, ...(o.owner ? { owner: o.owner } : {}) })
    if (lease) break
  }
  const before = await readStatus(storage, nameHash)
  if (before?.status === 'SUCCESS' && (!o.force || waited)) {
    await lease.release()
    const at = new Date(before.at).toISOString()
    return { status: 'SKIPPED', detail: `done at ${at}${waited ? ' (by a concurrent run)' : ''}`, startedAt, finishedAt: new Date().toISOString() }
  }
  const abort = new AbortController()
  lease.keepAlive({ onLost: (err) => abort.abort(err) })
  const prov = provenance()
  const info: Omit<StepInfo, 'status'> = {
    name: version.name,
    version: version.hash,
    nameHash,
    outputPath: o.outputPath,
    versionedConfig: version.config,
    config: o.config,
    dependencies: version.dependencies,
    startedAt,
    owner: lease.owner,
    provenance: prov,
  }
  const stepLog = openStepLog(storage, `${nameHash}/logs/${o.logName ?? `${startedAt.replace(/[:.]/g, '-')}-${process.pid}.log`}`, { step: nameHash })
  let error: unknown
  try {
    await writeStatus(storage, nameHash, 'RUNNING')
    await writeInfo(storage, { ...info, status: 'RUNNING' })
    if (before && before.status !== 'SUCCESS') stepLog.log.info({ previous: before.status }, 'taking the step over')
    stepLog.log.info({ outputPath: o.outputPath, version: version.hash }, 'step started')
    await o.step.fn(o.config as never, { outputPath: o.outputPath, prefix: storage.url.startsWith('file://') ? fileURLToPath(storage.url) : storage.url, log: stepLog.log, signal: abort.signal })
    if (abort.signal.aborted) throw abort.signal.reason
    stepLog.log.info('step succeeded')
  } catch (err) {
    error = err
    stepLog.log.error({ err }, 'step failed')
  }
  await stepLog.close()
  const finishedAt = new Date().toISOString()
  const status = error === undefined ? 'SUCCESS' : 'FAILED'
  const message = error === undefined ? undefined : error instanceof Error ? (error.stack ?? error.message) : String(error)
  if (abort.signal.aborted) {
    // Someone else holds the step now: its status is theirs to write.
    return { status: 'FAILED', error: `lease lost while running: ${(abort.signal.reason as Error).message}`, startedAt, finishedAt }
  }
  try {
    await writeInfo(storage, { ...info, status, finishedAt, ...(message ? { error: message } : {}) })
    await writeStatus(storage, nameHash, status)
    await recordHistory(storage, version.name, { nameHash, hash: version.hash, fields: version.fields, dependencies: version.dependencies, status, at: finishedAt })
  } finally {
    await lease.release().catch((err: unknown) => {
      if (!isRiggingError(err, 'LEASE_NOT_OWNER')) throw err
      log.warn({ err, step: nameHash }, 'lease was taken over before release')
    })
  }
  return { status, ...(message ? { error: message } : {}), startedAt, finishedAt }
}
