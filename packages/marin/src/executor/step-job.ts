/**
 * @module A step as an iris job: the command imports the experiment script in a
 * Node process (through tsx, so TypeScript scripts work) and runs that one step
 * with `step-main.ts`; the job names `warm-step-runner.ts` as its warm runner, so
 * a worker that keeps one runs the step as a call in a process that has imported
 * the script already. The parent names the attempt and its lease owner, so it
 * can find the child's result file and clean up after a child that died holding
 * the lease.
 */
import { randomBytes } from 'node:crypto'
import { createRequire } from 'node:module'
import { hostname } from 'node:os'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { Lease, isRiggingError, type Storage } from '@marin/rigging'
import type { JobRequest } from '@marin/iris'
import { MarinError } from '../errors.js'
import { ignoreLostRace, lockPath, readStatus, writeStatus } from './status-files.js'
import type { StepResult } from './step-runner.js'
import type { StepTask } from './executor.js'

const require = createRequire(import.meta.url)
const STEP_MAIN = fileURLToPath(new URL('./step-main.ts', import.meta.url))
const WARM_RUNNER = fileURLToPath(new URL('./warm-step-runner.ts', import.meta.url))

/** One attempt at a step in a child process. */
export type StepAttempt = { readonly id: string; readonly owner: string }

export function newAttempt(): StepAttempt {
  const id = `${new Date().toISOString().replace(/[:.]/g, '-')}-${randomBytes(4).toString('hex')}`
  return { id, owner: `${hostname()}:${process.pid}:${id}` }
}

export const resultPath = (nameHash: string, attempt: StepAttempt) => `${nameHash}/logs/${attempt.id}.result.json`

/** The iris job request that runs `task` from `script`. */
export function stepJobRequest(
  task: StepTask,
  script: string | undefined,
  experiment: string,
  attempt: StepAttempt,
): JobRequest {
  if (!script) {
    throw new MarinError(
      'SCRIPT_INVALID',
      `experiment "${experiment}": its script file is unknown, so its ` +
        `steps cannot run as iris jobs; pass script: import.meta.url to ` +
        `new Experiment(...), or run with --local`,
    )
  }
  const tsx = pathToFileURL(require.resolve('tsx')).href
  const node = [process.execPath, '--import', tsx]
  return {
    name: `${experiment}.${task.version.nameHash}`.replace(/[^A-Za-z0-9._-]/g, '-').slice(0, 100),
    command: [
      ...node,
      STEP_MAIN,
      script,
      task.step.name,
      task.version.nameHash,
      '--attempt',
      attempt.id,
      '--owner',
      attempt.owner,
      ...(task.force ? ['--force'] : []),
    ],
    runner: { command: [...node, WARM_RUNNER] },
    resources: task.step.resources ?? 'cpu=1,memory=1G,gpu=0',
    // The same for every step of a run (what differs is in the arguments), so that they share a warm runner.
    env: { MARIN_PREFIX: task.storage.url, MARIN_STEP_CHILD: '1', MARIN_LEASE_TTL_MS: String(task.leaseTtlMs) },
  }
}

/** The result the child wrote, if it got that far. */
export async function readResult(
  storage: Storage,
  nameHash: string,
  attempt: StepAttempt,
): Promise<StepResult | undefined> {
  try {
    return JSON.parse(await storage.readText(resultPath(nameHash, attempt))) as StepResult
  } catch (err) {
    if (isRiggingError(err, 'STORAGE_NOT_FOUND') || err instanceof SyntaxError) return undefined
    throw err
  }
}

/**
 * After a child ended without a result: if the step is still ours (its lease
 * is ours, expired, or absent) and RUNNING, mark it FAILED so the next run redoes it.
 */
export async function failAbandoned(
  storage: Storage,
  nameHash: string,
  attempt: StepAttempt,
  ttlMs: number,
  why: string,
  startedAt: string,
): Promise<StepResult> {
  const lease = await Lease.tryAcquire(storage, lockPath(nameHash), { ttlMs, owner: attempt.owner })
  if (lease) {
    try {
      const st = await readStatus(storage, nameHash)
      // Conditional: the child, if only frozen, may still have written its status since our read.
      if (st?.status === 'RUNNING' || st === undefined)
        await writeStatus(storage, nameHash, 'FAILED', {
          condition: st ? { ifGeneration: st.generation } : { ifAbsent: true },
        }).catch(ignoreLostRace)
    } finally {
      await lease.release()
    }
  }
  return { status: 'FAILED', error: why, startedAt, finishedAt: new Date().toISOString() }
}
