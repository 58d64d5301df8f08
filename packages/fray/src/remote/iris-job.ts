/** @module Jobs on the iris backend: a fray job request becomes one iris job (replicas = tasks). */
import { isFinalJobState, type IrisClient, type JobState } from '@marin/iris'
import { FrayError } from '../errors.js'
import type { JobHandle, JobRequest, JobStatus, JobWaitOptions } from '../job.js'
import { memoryBytes } from '../resources.js'
import { jobCommand } from '../local-job.js'

const STATES: Record<JobState, JobStatus> = {
  PENDING: 'pending',
  RUNNING: 'running',
  SUCCEEDED: 'succeeded',
  FAILED: 'failed',
  KILLED: 'stopped',
  UNSCHEDULABLE: 'failed',
}

export async function submitIrisJob(iris: IrisClient, req: JobRequest): Promise<JobHandle> {
  const { command, env } = jobCommand(req)
  const jobId = await iris.submit({
    name: req.name,
    command,
    env: { ...req.env, ...env },
    resources: { cpu: req.resources.cpu, memory: memoryBytes(req.resources.memory), gpu: req.resources.gpu },
    replicas: req.resources.replicas,
    maxRetriesFailure: req.maxRetries,
  })
  const readLogs = async (): Promise<string[]> => {
    const lines: string[] = []
    const multi = req.resources.replicas > 1
    for await (const l of iris.logs(jobId)) lines.push(multi ? `[${l.taskIndex}] ${l.line}` : l.line)
    return lines
  }
  return {
    jobId,
    status: async () => STATES[(await iris.status(jobId)).state],
    async wait(opts: JobWaitOptions = {}) {
      let job
      try {
        job = await iris.wait(jobId, opts.timeoutMs !== undefined ? { timeoutMs: opts.timeoutMs } : {})
      } catch (err) {
        throw new FrayError(
          'JOB_TIMEOUT',
          `job ${jobId} is not finished after ${opts.timeoutMs} ms; it ` +
            `keeps running: terminate() it or wait longer`,
          { cause: err },
        )
      }
      const s = STATES[job.state]
      if (s === 'failed' && (opts.raiseOnFailure ?? true)) {
        const i = Math.max(
          0,
          job.tasks.findIndex((t) => t.state !== 'SUCCEEDED'),
        )
        const task = job.tasks[i]
        const sig = task?.error ? /signal (SIG[A-Z0-9]+)/.exec(task.error)?.[1] : undefined
        const how = sig
          ? `signal ${sig}`
          : task?.exitCode !== undefined
            ? `code ${task.exitCode}`
            : (job.error ?? job.state.toLowerCase())
        const tail = (await readLogs()).slice(-10).join('\n')
        throw new FrayError('JOB_FAILED', `job ${jobId}: replica ${i} exited with ${how}; last output:\n${tail}`)
      }
      return s
    },
    logs: readLogs,
    async terminate() {
      const st = await iris.status(jobId)
      if (!isFinalJobState(st.state)) await iris.kill(jobId)
    },
  }
}
