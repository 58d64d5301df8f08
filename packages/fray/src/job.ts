/**
 * @module Jobs: a command or an exported function run to completion as one or more
 * processes (replicas), with status, logs and termination. Plain-data requests, so the
 * same request runs on the local backend or as an iris job.
 */
import { z } from 'zod'
import { FrayError } from './errors.js'
import { Resources } from './resources.js'

/** Run a program: `{ command: ['python', 'train.py'] }`. */
export const CommandEntrypoint = z.strictObject({
  command: z.array(z.string()).min(1).describe('argv; the first element is the program'),
})

/** Run `export(...args)` from a module in a fresh Node process (TypeScript allowed). */
export const CallableEntrypoint = z.strictObject({
  module: z.string().min(1).describe('module URL or absolute path'),
  export: z.string().min(1).default('main').describe('exported function to call'),
  args: z.array(z.unknown()).default([]).describe('serializable arguments'),
})

export const JobRequest = z.strictObject({
  /** Letters, digits, `.`, `_`, `-`. */
  name: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/, 'letters, digits, ".", "_" and "-", at most 128'),
  entrypoint: z.union([CommandEntrypoint, CallableEntrypoint]),
  /** Extra environment variables. @default {} */
  env: z.record(z.string(), z.string()).default({}),
  /** Working directory. @default the driver's */
  cwd: z.string().optional(),
  /** `replicas` copies are started; each sees `FRAY_REPLICA_INDEX` and `FRAY_REPLICA_COUNT`. */
  resources: Resources.default({ cpu: 1, memory: '1Gi', gpu: 0, replicas: 1 }),
  /** Times a failed replica is started again. @default 0 */
  maxRetries: z.number().int().min(0).max(100).default(0),
})
export type JobRequestInput = z.input<typeof JobRequest>
export type JobRequest = z.output<typeof JobRequest>

/** Validates a job request; a bad field throws `INVALID_JOB_REQUEST` naming it. */
export function jobRequest(input: JobRequestInput): JobRequest {
  const r = JobRequest.safeParse(input)
  if (!r.success) {
    const issue = r.error.issues[0]!
    throw new FrayError('INVALID_JOB_REQUEST', `job request ${issue.path.join('.') || '(root)'}: ${issue.message}`)
  }
  return r.data
}

export type JobStatus = 'pending' | 'running' | 'succeeded' | 'failed' | 'stopped'

export type JobWaitOptions = {
  /** Reject with `JOB_TIMEOUT` after this long (the job keeps running). @default none */
  timeoutMs?: number
  /** Throw `JOB_FAILED` when the job fails. @default true */
  raiseOnFailure?: boolean
}

/** A submitted job. */
export type JobHandle = {
  readonly jobId: string
  status(): Promise<JobStatus>
  /** Resolves with the final status. */
  wait(opts?: JobWaitOptions): Promise<JobStatus>
  /** Output lines so far (stdout and stderr, prefixed `[i] ` per replica when there are several). */
  logs(): Promise<string[]>
  /** Stops every replica (SIGTERM, then SIGKILL). */
  terminate(): Promise<void>
}
