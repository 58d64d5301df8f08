/**
 * @module The controller's gRPC service (through ducky): its definition, the
 * implementation over a `Controller`, and how iris errors cross the wire.
 */
import { defineService, RpcError, serverStream, unary, type RpcCode } from '@marin/ducky'
import { IRIS_ERROR_CODES, IrisError, type IrisErrorCode } from './errors.js'
import type { Controller } from './controller.js'
import type { JobState } from './states.js'
import {
  Empty,
  GetJobResponse,
  HeartbeatRequest,
  HeartbeatResponse,
  JobRef,
  KillResponse,
  ListJobsRequest,
  ListJobsResponse,
  ListWorkersResponse,
  LogLineSchema,
  LogsRequest,
  RegisterRequest,
  RegisterResponse,
  ReportRequest,
  ReportResponse,
  SubmitRequest,
  SubmitResponse,
  WaitJobRequest,
  WaitJobResponse,
} from './protocol.js'

/** The iris controller service, `marin.iris.Controller`. */
export const ControllerService = defineService({
  name: 'marin.iris.Controller',
  methods: {
    submit: unary(SubmitRequest, SubmitResponse),
    getJob: unary(JobRef, GetJobResponse, { idempotent: true }),
    waitJob: unary(WaitJobRequest, WaitJobResponse, { idempotent: true }),
    listJobs: unary(ListJobsRequest, ListJobsResponse, { idempotent: true }),
    kill: unary(JobRef, KillResponse, { idempotent: true }),
    listWorkers: unary(Empty, ListWorkersResponse, { idempotent: true }),
    logs: serverStream(LogsRequest, LogLineSchema, { idempotent: true }),
    register: unary(RegisterRequest, RegisterResponse, { idempotent: true }),
    heartbeat: unary(HeartbeatRequest, HeartbeatResponse, { idempotent: true }),
    report: unary(ReportRequest, ReportResponse, { idempotent: true }),
  },
})
export type ControllerServiceDef = typeof ControllerService

const TO_RPC: Partial<Record<IrisErrorCode, RpcCode>> = {
  JOB_NOT_FOUND: 'NOT_FOUND',
  WORKER_NOT_FOUND: 'NOT_FOUND',
  BAD_REQUEST: 'INVALID_ARGUMENT',
  BAD_RESOURCES: 'INVALID_ARGUMENT',
  BAD_MOUNT: 'INVALID_ARGUMENT',
  BAD_DURATION: 'INVALID_ARGUMENT',
  CONTROLLER_UNAVAILABLE: 'UNAVAILABLE',
}

// The iris code rides at the front of the status details: "[JOB_NOT_FOUND] job … does not exist".
function toRpc(err: unknown): unknown {
  if (err instanceof IrisError) return new RpcError(TO_RPC[err.code] ?? 'FAILED_PRECONDITION', `[${err.code}] ${err.message}`, { cause: err })
  return err
}

/** Turns an error from a controller call back into an IrisError where it carries an iris code. */
export function fromRpc(err: unknown, address: string): unknown {
  if (!(err instanceof RpcError)) return err
  const m = /^\[([A-Z_]+)\] ([\s\S]*)$/.exec(err.details)
  if (m && (IRIS_ERROR_CODES as readonly string[]).includes(m[1]!)) return new IrisError(m[1] as IrisErrorCode, m[2]!, { cause: err })
  if (err.code === 'UNAVAILABLE' || err.code === 'DEADLINE_EXCEEDED') {
    return new IrisError('CONTROLLER_UNAVAILABLE', `controller at ${address} did not answer (${err.code}: ${err.details}); check that "iris controller" runs there and --controller points at it`, { cause: err })
  }
  if (err.code === 'UNAUTHENTICATED') {
    return new IrisError('UNAUTHENTICATED', `controller at ${address} refused the call: ${err.details}; pass the controller's token with --token or IRIS_TOKEN`, { cause: err })
  }
  return err
}

function guard<A extends unknown[], R>(fn: (...args: A) => R): (...args: A) => R {
  return (...args: A) => {
    try {
      const r = fn(...args)
      return r instanceof Promise ? (r.catch((e: unknown) => Promise.reject(toRpc(e))) as R) : r
    } catch (e) {
      throw toRpc(e)
    }
  }
}

/** The service implementation over an in-process controller. */
export function controllerImpl(c: Controller) {
  return {
    submit: guard(({ spec }: { spec: Parameters<Controller['submit']>[0] }) => ({ jobId: c.submit(spec) })),
    getJob: guard(({ jobId }: { jobId: string }) => ({ job: c.getJob(jobId), attempts: c.getAttempts(jobId) })),
    waitJob: guard(async ({ jobId, waitMs }: { jobId: string; waitMs: number }, ctx: { signal: AbortSignal }) => {
      const signal = AbortSignal.any([ctx.signal, AbortSignal.timeout(waitMs)])
      try {
        return { job: await c.waitForJob(jobId, { signal }) }
      } catch (e) {
        // The wait ran out: answer with the job as it is now.
        if (signal.aborted && !ctx.signal.aborted) return { job: c.getJob(jobId) }
        throw e
      }
    }),
    listJobs: guard((req: { states?: JobState[]; limit?: number }) => ({
      jobs: c.listJobs({ ...(req.states ? { states: req.states } : {}), ...(req.limit ? { limit: req.limit } : {}) }),
    })),
    kill: guard(({ jobId }: { jobId: string }) => ({ state: c.kill(jobId) })),
    listWorkers: guard(() => ({ workers: c.listWorkers() })),
    logs: async function* (req: { jobId: string; afterSeq?: number; sinceTs?: number; taskIndex?: number; follow?: boolean }, ctx: { signal: AbortSignal }) {
      try {
        const opts = { ...(req.afterSeq !== undefined ? { afterSeq: req.afterSeq } : {}), ...(req.sinceTs !== undefined ? { sinceTs: req.sinceTs } : {}), ...(req.taskIndex !== undefined ? { taskIndex: req.taskIndex } : {}) }
        if (req.follow) {
          yield* c.followLogs(req.jobId, { ...opts, signal: ctx.signal })
        } else {
          let afterSeq = opts.afterSeq ?? 0
          for (;;) {
            const batch = c.readLogs(req.jobId, { ...opts, afterSeq, limit: 5000 })
            yield* batch
            if (batch.length < 5000) break
            afterSeq = batch[batch.length - 1]!.seq
          }
        }
      } catch (e) {
        throw toRpc(e)
      }
    },
    register: guard((req: Parameters<Controller['registerWorker']>[0]) => c.registerWorker(req)),
    heartbeat: guard((req: Parameters<Controller['heartbeat']>[0], ctx: { signal: AbortSignal }) => c.heartbeat(req, ctx.signal)),
    report: guard((req: Parameters<Controller['report']>[0]) => c.report(req)),
  }
}
