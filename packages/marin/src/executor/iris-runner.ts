/** @module Running steps as iris jobs: one job per step, logs copied into the step's `logs/` folder. */
import { logger } from '@marin/rigging'
import type { JobScheduler } from '@marin/iris'
import type { StepRunner } from './executor.js'
import { failAbandoned, newAttempt, readResult, stepJobRequest } from './step-job.js'
import { progressText } from './progress.js'
import { readStatus } from './status-files.js'
import { waitForLease } from './step-runner.js'

const log = logger('marin')

/** A runner that submits each step to `scheduler` (or the one it resolves with) and waits for it. */
export function irisRunner(
  scheduler: Pick<JobScheduler, 'submit'> | Promise<Pick<JobScheduler, 'submit'>>,
  script: string | undefined,
  experiment: string,
): StepRunner {
  return async (task) => {
    const startedAt = new Date().toISOString()
    const nameHash = task.version.nameHash
    // A step running elsewhere is waited on here, so that no job is started just to wait.
    const waited = await waitForLease(task.storage, nameHash, task.leaseTtlMs)
    if (waited) {
      const st = await readStatus(task.storage, nameHash)
      if (st?.status === 'SUCCESS')
        return {
          status: 'SKIPPED',
          detail: `done at ${new Date(st.at).toISOString()} (by a concurrent run)`,
          startedAt,
          finishedAt: new Date().toISOString(),
        }
    }
    const attempt = newAttempt()
    const request = stepJobRequest(task, script, experiment, attempt)
    const [job] = await (await scheduler).submit(request)
    // Follow the job's log so the driver can show what the step is doing; the lines followed to
    // the job's end are also what is kept with the step, so the log is read once.
    const followed: string[] = []
    let followedToEnd = false
    const following = (async () => {
      if (!task.progress) return
      try {
        for await (const l of job!.logs({ follow: true })) {
          followed.push(l.line)
          const text = progressText(l.line)
          if (text) task.progress(text)
        }
        followedToEnd = true
      } catch (err) {
        log.debug({ err, jobId: job!.jobId }, 'stopped following the job log')
      }
    })()
    const final = await job!.wait()
    await Promise.race([following, new Promise((r) => setTimeout(r, 2000).unref())])
    // Keep the job's output (stdout and stderr of the step process) with the step.
    try {
      let lines = followed
      if (!followedToEnd) {
        lines = []
        for await (const l of job!.logs()) lines.push(l.line)
      }
      await task.storage.write(`${nameHash}/logs/${attempt.id}.job.log`, lines.map((l) => `${l}\n`).join(''))
    } catch (err) {
      log.warn({ err, step: nameHash, jobId: job!.jobId }, 'could not copy the job log')
    }
    const result = await readResult(task.storage, nameHash, attempt)
    if (result) return result
    return failAbandoned(
      task.storage,
      nameHash,
      attempt,
      task.leaseTtlMs,
      `iris job ${job!.jobId} ended ${final.state} without a result${final.error ? `: ${final.error}` : ''}`,
      startedAt,
    )
  }
}
