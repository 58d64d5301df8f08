/** @module Plain records the controller returns: job, task, attempt, worker and log line. */
import type { JobSpec } from './job-spec.js'
import type { Resources } from './resources.js'
import type { AttemptState, JobState, Priority, TaskState } from './states.js'

export type TaskStatus = {
  taskIndex: number
  state: TaskState
  /** Attempts started so far (1-based number of the latest). */
  attempts: number
  failures: number
  workerLosses: number
  workerId?: string
  exitCode?: number
  error?: string
}

export type JobStatus = {
  jobId: string
  name: string
  state: JobState
  priority: Priority
  spec: JobSpec
  submittedAt: number
  startedAt?: number
  finishedAt?: number
  /** For FAILED: the exit code of the task that failed it; for SUCCEEDED: 0. */
  exitCode?: number
  /** Why the job failed, was killed or is unschedulable. */
  error?: string
  tasks: TaskStatus[]
}

export type AttemptStatus = {
  attemptId: string
  jobId: string
  taskIndex: number
  attempt: number
  workerId: string
  state: AttemptState
  assignedAt: number
  startedAt?: number
  finishedAt?: number
  exitCode?: number
  error?: string
}

export type WorkerStatus = {
  workerId: string
  address: string
  resources: Resources
  docker: boolean
  dockerReason?: string
  state: 'ALIVE' | 'LOST'
  registeredAt: number
}

export type LogLine = {
  seq: number
  jobId: string
  taskIndex: number
  attempt: number
  stream: 'stdout' | 'stderr'
  ts: number
  line: string
}
