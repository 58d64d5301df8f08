/**
 * @module An Experiment as a job source for iris's `JobScheduler.submit`: the
 * executor runs with a runner that hands each step's job request to the
 * scheduler (by yielding it) and then follows the step through its files.
 */
import type { JobRequest } from '@marin/iris'
import { readLease } from '@marin/rigging'
import { Executor, type ExecutorOptions, type StepRunner } from './executor.js'
import type { Experiment } from './experiment.js'
import { lockPath, readStatus } from './status-files.js'
import { failAbandoned, newAttempt, readResult, stepJobRequest } from './step-job.js'
import { waitForLease } from './step-runner.js'

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** Job requests of the steps of `experiment` that must run, each when its dependencies are done. */
export async function* experimentJobs(experiment: Experiment, opts: Omit<ExecutorOptions, 'runner' | 'dryRun'> = {}): AsyncGenerator<JobRequest> {
  const queue: JobRequest[] = []
  let wake: (() => void) | undefined
  const notify = () => {
    wake?.()
    wake = undefined
  }
  const runner: StepRunner = async (task) => {
    const startedAt = new Date().toISOString()
    const nameHash = task.version.nameHash
    if (await waitForLease(task.storage, nameHash, task.leaseTtlMs)) {
      const st = await readStatus(task.storage, nameHash)
      if (st?.status === 'SUCCESS') return { status: 'SKIPPED', detail: 'done by a concurrent run', startedAt, finishedAt: new Date().toISOString() }
    }
    const attempt = newAttempt()
    queue.push(stepJobRequest(task, experiment.script, experiment.name, attempt))
    notify()
    // The job's process writes a result file; a process that died is noticed by its lease expiring.
    const poll = Math.max(50, Math.min(500, Math.floor(task.leaseTtlMs / 5)))
    let seenLease = false
    for (;;) {
      const result = await readResult(task.storage, nameHash, attempt)
      if (result) return result
      const lease = await readLease(task.storage, lockPath(nameHash))
      if (lease?.record?.owner === attempt.owner) {
        seenLease = true
        if (lease.record.expiresAt <= Date.now()) {
          return failAbandoned(task.storage, nameHash, attempt, task.leaseTtlMs, `the step process stopped renewing its lease (expired ${new Date(lease.record.expiresAt).toISOString()})`, startedAt)
        }
      } else if (seenLease && !lease) {
        // Released without a result file: give the result write a moment, then read once more.
        await sleep(poll)
        const late = await readResult(task.storage, nameHash, attempt)
        if (late) return late
        return failAbandoned(task.storage, nameHash, attempt, task.leaseTtlMs, 'the step process released its lease without writing a result', startedAt)
      }
      await sleep(poll)
    }
  }
  let finished = false
  let failure: unknown
  const running = new Executor({ ...opts, runner })
    .run(experiment)
    .catch((err: unknown) => {
      failure = err
    })
    .finally(() => {
      finished = true
      notify()
    })
  for (;;) {
    const next = queue.shift()
    if (next) {
      yield next
      continue
    }
    if (finished) break
    await new Promise<void>((r) => (wake = r))
  }
  await running
  if (failure) throw failure
}
