/** @module Job, task and attempt states, priority bands, and which of them are final. */

/** Priority bands, highest first: the scheduler drains a band before looking at the next. */
export const PRIORITIES = ['production', 'interactive', 'batch'] as const
export type Priority = (typeof PRIORITIES)[number]

export const JOB_STATES = ['PENDING', 'RUNNING', 'SUCCEEDED', 'FAILED', 'KILLED', 'UNSCHEDULABLE'] as const
export type JobState = (typeof JOB_STATES)[number]

/**
 * A task is one replica of a job. ASSIGNED means a worker was chosen and told;
 * WORKER_FAILED means its worker was lost more often than the job's budget allows.
 */
export const TASK_STATES = [
  'PENDING',
  'ASSIGNED',
  'RUNNING',
  'SUCCEEDED',
  'FAILED',
  'KILLED',
  'WORKER_FAILED',
  'UNSCHEDULABLE',
] as const
export type TaskState = (typeof TASK_STATES)[number]

/** One try of a task on one worker. */
export const ATTEMPT_STATES = ['ASSIGNED', 'RUNNING', 'SUCCEEDED', 'FAILED', 'KILLED', 'WORKER_FAILED'] as const
export type AttemptState = (typeof ATTEMPT_STATES)[number]

const FINAL_JOB: ReadonlySet<string> = new Set(['SUCCEEDED', 'FAILED', 'KILLED', 'UNSCHEDULABLE'])
const FINAL_TASK: ReadonlySet<string> = new Set(['SUCCEEDED', 'FAILED', 'KILLED', 'WORKER_FAILED', 'UNSCHEDULABLE'])
const FINAL_ATTEMPT: ReadonlySet<string> = new Set(['SUCCEEDED', 'FAILED', 'KILLED', 'WORKER_FAILED'])

export const isFinalJobState = (s: string): boolean => FINAL_JOB.has(s)
export const isFinalTaskState = (s: string): boolean => FINAL_TASK.has(s)
export const isFinalAttemptState = (s: string): boolean => FINAL_ATTEMPT.has(s)
