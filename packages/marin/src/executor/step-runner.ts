/**
 * @module Running one step where we are (the executor's process with `--local`,
 * or an iris job's process): take the step's lease, mark it RUNNING, call its
 * function on a staging folder, publish the output and mark SUCCESS or FAILED,
 * give the lease back.
 *
 * The lease is what makes concurrent runs safe: of two processes that reach the
 * same step, one gets the lease and runs it; the other waits until the lease is
 * released (then sees SUCCESS and skips) or expires (its holder died: it takes over).
 * It is renewed from a worker thread, so a step function that blocks the event
 * loop (a synchronous loop, a sync call) keeps it. A run that loses it anyway
 * (its process was frozen, its storage unreachable past the TTL) is fenced:
 * - before publishing, it proves it still holds the lease (`lease.fence()`, a
 *   renewal conditional on the generation it last wrote), else fails LEASE_LOST;
 * - its final `.executor_info` and `.executor_status` writes are conditional on
 *   the generations of its own RUNNING writes, which whoever took the step over
 *   has replaced with theirs;
 * - its function wrote only into its own staging folder (`step-output.ts`).
 */
import { mkdir } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import {
  Lease,
  RiggingError,
  isRiggingError,
  provenance,
  readLease,
  type ObjectInfo,
  type Storage,
} from '@marin/rigging'
import { logger, secretFingerprints } from '@marin/rigging'
import { readArtifactInputs } from './artifacts.js'
import {
  lockPath,
  readStatus,
  recordHistory,
  writeInfo,
  writeStatus,
  type StatusRecord,
  type StepInfo,
} from './status-files.js'
import { openStepLog } from './step-log.js'
import { clearOtherStaging, discardStaging, newStaging, publishOutput } from './step-output.js'
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
export async function waitForLease(
  storage: Storage,
  nameHash: string,
  ttlMs: number,
  signal?: AbortSignal,
): Promise<boolean> {
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

const errorText = (err: unknown) => (err instanceof Error ? (err.stack ?? err.message) : String(err))
const leaseLostText = (err: unknown, what: string) =>
  `LEASE_LOST: ${err instanceof Error ? err.message : String(err)}` +
  `; ${what}. Another run holds the step now; its status is theirs to write.`

/**
 * Takes the step's lease (waiting while someone else holds it) and marks the
 * step RUNNING at the generation of the status just read. Returns the status
 * seen before, or SKIPPED when the step is done and need not run again.
 */
async function takeStep(
  o: RunStepOptions,
  startedAt: string,
): Promise<StepResult | { lease: Lease; before: StatusRecord | undefined; running: ObjectInfo }> {
  const { storage } = o
  const nameHash = o.version.nameHash
  let waited = false
  for (;;) {
    waited = (await waitForLease(storage, nameHash, o.leaseTtlMs)) || waited
    const lease = await Lease.tryAcquire(storage, lockPath(nameHash), {
      ttlMs: o.leaseTtlMs,
      ...(o.owner ? { owner: o.owner } : {}),
    })
    if (!lease) continue
    try {
      for (;;) {
        const before = await readStatus(storage, nameHash)
        if (before?.status === 'SUCCESS' && (!o.force || waited)) {
          await lease.release()
          const at = new Date(before.at).toISOString()
          return {
            status: 'SKIPPED',
            detail: `done at ${at}${waited ? ' (by a concurrent run)' : ''}`,
            startedAt,
            finishedAt: new Date().toISOString(),
          }
        }
        try {
          const running = await writeStatus(storage, nameHash, 'RUNNING', {
            owner: lease.owner,
            condition: before ? { ifGeneration: before.generation } : { ifAbsent: true },
          })
          return { lease, before, running }
        } catch (err) {
          // A run that had lost the lease wrote the status after our read: look again.
          if (!isRiggingError(err, 'STORAGE_CONDITION_FAILED')) throw err
          waited = true
        }
      }
    } catch (err) {
      await lease.release().catch(() => {})
      throw err
    }
  }
}

/** What `.executor_info` keeps of the secrets this process registered: their fingerprints, when there are any. */
function secretsOf(): { secrets?: ReturnType<typeof secretFingerprints> } {
  const secrets = secretFingerprints()
  return secrets.values.length > 0 ? { secrets } : {}
}

/** Runs the step here under its lease; see the module comment. Never throws for a failing step function. */
export async function runStepHere(o: RunStepOptions): Promise<StepResult> {
  const { storage, version } = o
  const nameHash = version.nameHash
  const startedAt = new Date().toISOString()
  const taken = await takeStep(o, startedAt)
  if ('status' in taken) return taken
  const { lease, before, running } = taken
  const abort = new AbortController()
  const staging = newStaging(storage, nameHash, o.outputPath)
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
  const stepLog = openStepLog(
    storage,
    `${nameHash}/logs/${o.logName ?? `${startedAt.replace(/[:.]/g, '-')}-${process.pid}.log`}`,
    { step: nameHash },
  )
  let error: unknown
  let infoWritten: ObjectInfo | undefined
  try {
    // Renewals from a thread of their own, running before the function starts.
    await lease.keepAliveOffThread({ onLost: (err) => abort.abort(err), storageOptions: { private: true } })
    await clearOtherStaging(storage, staging)
    // The folder exists when the function starts, as the step folder always did.
    const localStaging = storage.localPath(staging.rel)
    if (localStaging) await mkdir(localStaging, { recursive: true })
    infoWritten = await writeInfo(storage, { ...info, status: 'RUNNING' })
    if (before && before.status !== 'SUCCESS') stepLog.log.info({ previous: before.status }, 'taking the step over')
    stepLog.log.info({ outputPath: o.outputPath, staging: staging.outputPath, version: version.hash }, 'step started')
    await o.step.fn((await readArtifactInputs(o.config, storage)) as never, {
      outputPath: staging.outputPath,
      prefix: storage.url.startsWith('file://') ? fileURLToPath(storage.url) : storage.url,
      log: stepLog.log,
      signal: abort.signal,
    })
    if (abort.signal.aborted) throw abort.signal.reason
  } catch (err) {
    error = err
  }
  // Fencing: nothing below happens unless the lease is still ours.
  const fenced = await lease.fence().then(
    () => undefined,
    (err: unknown) => err,
  )
  if (fenced !== undefined) {
    const notDone = "the step's output was not published and its status not written"
    const message = isRiggingError(fenced, 'LEASE_LOST')
      ? leaseLostText(fenced, notDone)
      : `cannot confirm that this run still holds the step's lease (${errorText(fenced)}); ${notDone}`
    stepLog.log.error({ err: fenced }, 'lease lost: output not published, status not written')
    await stepLog.close()
    await discardStaging(storage, staging).catch(() => {})
    await lease.release().catch(() => {})
    return { status: 'FAILED', error: message, startedAt, finishedAt: new Date().toISOString() }
  }
  // A failed run's output is published too (its partial results explain the failure); dependents start only on SUCCESS.
  try {
    await publishOutput(storage, staging)
  } catch (err) {
    error ??= err
  }
  if (error === undefined) stepLog.log.info('step succeeded')
  else stepLog.log.error({ err: error }, 'step failed')
  await stepLog.close()
  await discardStaging(storage, staging).catch((err: unknown) =>
    log.warn({ err, step: nameHash }, 'cannot remove the staging folder'),
  )
  const finishedAt = new Date().toISOString()
  const status = error === undefined ? 'SUCCESS' : 'FAILED'
  const message = error === undefined ? undefined : errorText(error)
  try {
    await writeInfo(
      storage,
      { ...info, status, finishedAt, ...(message ? { error: message } : {}), ...secretsOf() },
      infoWritten ? { ifGeneration: infoWritten.generation } : undefined,
    )
    await writeStatus(storage, nameHash, status, { condition: { ifGeneration: running.generation } })
  } catch (err) {
    if (!isRiggingError(err, 'STORAGE_CONDITION_FAILED')) {
      await lease.release().catch(() => {})
      throw err
    }
    await lease.release().catch(() => {})
    const lost = new RiggingError(
      'LEASE_LOST',
      `step ${nameHash}: another run wrote its status or info after this run's RUNNING (${err.message})`,
    )
    return {
      status: 'FAILED',
      error: leaseLostText(lost, `this run's ${status} was not written`),
      startedAt,
      finishedAt,
    }
  }
  try {
    await recordHistory(storage, version.name, {
      nameHash,
      hash: version.hash,
      fields: version.fields,
      dependencies: version.dependencies,
      status,
      at: finishedAt,
    })
  } finally {
    await lease.release().catch((err: unknown) => {
      if (!isRiggingError(err, 'LEASE_NOT_OWNER')) throw err
      log.warn({ err, step: nameHash }, 'lease was taken over before release')
    })
  }
  return { status, ...(message ? { error: message } : {}), startedAt, finishedAt }
}
