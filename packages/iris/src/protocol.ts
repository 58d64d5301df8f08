/**
 * @module The messages between clients, workers and the controller, as zod schemas.
 * The gRPC service (`controller-service.ts`) is built from these; in-process callers
 * use the same shapes.
 */
import { z } from 'zod'
import { JobSpecSchema, ResourcesSchema } from './job-spec.js'
import { ATTEMPT_STATES, JOB_STATES, PRIORITIES, TASK_STATES } from './states.js'

// ---- worker ↔ controller ---------------------------------------------------

/** What a worker knows about one attempt it holds. */
export const AttemptReportSchema = z.strictObject({
  attemptId: z.string(),
  state: z.enum(ATTEMPT_STATES),
  exitCode: z.number().int().optional(),
  error: z.string().optional(),
  at: z.number(),
})
export type AttemptReport = z.infer<typeof AttemptReportSchema>

/** One task attempt handed to a worker. */
export const AssignmentSchema = z.strictObject({
  attemptId: z.string(),
  jobId: z.string(),
  taskIndex: z.number().int(),
  attempt: z.number().int(),
  numTasks: z.number().int(),
  spec: JobSpecSchema,
  /** The job's own token, given to its tasks as IRIS_TOKEN (absent when the controller has no auth). */
  token: z.string().optional(),
})
export type TaskAssignment = z.infer<typeof AssignmentSchema>

export const RegisterRequest = z.strictObject({
  workerId: z.string().min(1),
  address: z.string(),
  resources: ResourcesSchema,
  docker: z.boolean(),
  dockerReason: z.string().optional(),
  attempts: z.array(AttemptReportSchema),
})
export const RegisterResponse = z.strictObject({
  heartbeatMs: z.number(),
  workerTimeoutMs: z.number(),
  controller: z.string(),
})

export const HeartbeatRequest = z.strictObject({
  workerId: z.string(),
  /** Every attempt the worker holds: running ones and finished ones not yet acknowledged. */
  attempts: z.array(AttemptReportSchema),
  /** How long the controller may hold the call open waiting for work (long poll). */
  waitMs: z.number().int().min(0).max(60_000),
})
export const HeartbeatResponse = z.strictObject({
  assign: z.array(AssignmentSchema),
  kill: z.array(z.string()),
  /** The controller does not know this worker (or declared it lost): register again. */
  reregister: z.boolean(),
})

/** One output line, numbered per attempt so that a resent batch is stored once. */
export const LogInputSchema = z.strictObject({
  attemptId: z.string(),
  lineNo: z.number().int().nonnegative(),
  stream: z.enum(['stdout', 'stderr']),
  ts: z.number(),
  line: z.string(),
})
export type LogInput = z.infer<typeof LogInputSchema>

export const ReportRequest = z.strictObject({
  workerId: z.string(),
  attempts: z.array(AttemptReportSchema),
  logs: z.array(LogInputSchema),
  /** The worker is shutting down: take nothing more to it, retry what it still holds. */
  leaving: z.boolean().optional(),
})
export const ReportResponse = z.strictObject({ reregister: z.boolean() })

// ---- clients ↔ controller --------------------------------------------------

export const TaskStatusSchema = z.strictObject({
  taskIndex: z.number().int(),
  state: z.enum(TASK_STATES),
  attempts: z.number().int(),
  failures: z.number().int(),
  workerLosses: z.number().int(),
  workerId: z.string().optional(),
  exitCode: z.number().int().optional(),
  error: z.string().optional(),
})

export const JobStatusSchema = z.strictObject({
  jobId: z.string(),
  name: z.string(),
  state: z.enum(JOB_STATES),
  priority: z.enum(PRIORITIES),
  spec: JobSpecSchema,
  submittedAt: z.number(),
  startedAt: z.number().optional(),
  finishedAt: z.number().optional(),
  exitCode: z.number().int().optional(),
  error: z.string().optional(),
  tasks: z.array(TaskStatusSchema),
})

export const AttemptStatusSchema = z.strictObject({
  attemptId: z.string(),
  jobId: z.string(),
  taskIndex: z.number().int(),
  attempt: z.number().int(),
  workerId: z.string(),
  state: z.enum(ATTEMPT_STATES),
  assignedAt: z.number(),
  startedAt: z.number().optional(),
  finishedAt: z.number().optional(),
  exitCode: z.number().int().optional(),
  error: z.string().optional(),
})

export const WorkerStatusSchema = z.strictObject({
  workerId: z.string(),
  address: z.string(),
  resources: ResourcesSchema,
  docker: z.boolean(),
  dockerReason: z.string().optional(),
  state: z.enum(['ALIVE', 'LOST']),
  registeredAt: z.number(),
})

export const LogLineSchema = z.strictObject({
  seq: z.number().int(),
  jobId: z.string(),
  taskIndex: z.number().int(),
  attempt: z.number().int(),
  stream: z.enum(['stdout', 'stderr']),
  ts: z.number(),
  line: z.string(),
})

export const SubmitRequest = z.strictObject({
  spec: JobSpecSchema,
  /** Made by the client once per submit: a retried call with the same id returns the job the first one made. */
  requestId: z.string().min(8).max(128).optional(),
})
export const SubmitResponse = z.strictObject({ jobId: z.string() })
export const JobRef = z.strictObject({ jobId: z.string().min(1) })
export const GetJobResponse = z.strictObject({ job: JobStatusSchema, attempts: z.array(AttemptStatusSchema) })
export const ListJobsRequest = z.strictObject({
  states: z.array(z.enum(JOB_STATES)).optional(),
  limit: z.number().int().positive().optional(),
})
export const ListJobsResponse = z.strictObject({ jobs: z.array(JobStatusSchema) })
export const KillResponse = z.strictObject({ state: z.enum(JOB_STATES) })
export const ListWorkersResponse = z.strictObject({ workers: z.array(WorkerStatusSchema) })
export const LogsRequest = z.strictObject({
  jobId: z.string().min(1),
  afterSeq: z.number().int().optional(),
  sinceTs: z.number().optional(),
  taskIndex: z.number().int().optional(),
  /** Keep the stream open and send new lines until the job ends. */
  follow: z.boolean().optional(),
})
/** Long poll: answers when the job is final or after `waitMs`, whichever is first. */
export const WaitJobRequest = z.strictObject({ jobId: z.string().min(1), waitMs: z.number().int().min(0).max(60_000) })
export const WaitJobResponse = z.strictObject({ job: JobStatusSchema })
export const Empty = z.strictObject({})
