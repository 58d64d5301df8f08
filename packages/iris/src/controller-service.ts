/**
 * @module The controller's gRPC service (through ducky): its definition, the
 * implementation over a `Controller`, and how iris errors cross the wire.
 */
import { defineService, RpcError, serverStream, unary, type CallContext, type RpcCode } from '@marin/ducky'
import { REDACTED } from '@marin/rigging'
import { ADMIN, type ClusterAuth, type Principal } from './credentials.js'
import { IRIS_ERROR_CODES, IrisError, isIrisError, type IrisErrorCode } from './errors.js'
import type { Controller } from './controller.js'
import type { JobSpec } from './job-spec.js'
import type { JobStatus } from './records.js'
import { isFinalJobState, type JobState } from './states.js'
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

const STATE_REPLY_BYTES = 64 * 1024 * 1024

/** The iris controller service, `marin.iris.Controller`. */
export const ControllerService = defineService({
  name: 'marin.iris.Controller',
  methods: {
    submit: unary(SubmitRequest, SubmitResponse),
    // Replies that grow with the cluster's state (jobs, attempts, workers) come from the
    // controller, which clients trust: they may be larger than a request may be.
    getJob: unary(JobRef, GetJobResponse, { idempotent: true, maxResponseBytes: STATE_REPLY_BYTES }),
    waitJob: unary(WaitJobRequest, WaitJobResponse, { idempotent: true, maxResponseBytes: STATE_REPLY_BYTES }),
    listJobs: unary(ListJobsRequest, ListJobsResponse, { idempotent: true, maxResponseBytes: STATE_REPLY_BYTES }),
    kill: unary(JobRef, KillResponse, { idempotent: true }),
    listWorkers: unary(Empty, ListWorkersResponse, { idempotent: true, maxResponseBytes: STATE_REPLY_BYTES }),
    logs: serverStream(LogsRequest, LogLineSchema, { idempotent: true }),
    register: unary(RegisterRequest, RegisterResponse, { idempotent: true }),
    heartbeat: unary(HeartbeatRequest, HeartbeatResponse, { idempotent: true }),
    // A worker's batch of up to 5000 log lines of up to 64 KiB: more than a control call's 4 MiB.
    report: unary(ReportRequest, ReportResponse, { idempotent: true, maxRequestBytes: 256 * 1024 * 1024 }),
  },
})

const TO_RPC: Partial<Record<IrisErrorCode, RpcCode>> = {
  JOB_NOT_FOUND: 'NOT_FOUND',
  WORKER_NOT_FOUND: 'NOT_FOUND',
  BAD_REQUEST: 'INVALID_ARGUMENT',
  BAD_RESOURCES: 'INVALID_ARGUMENT',
  BAD_MOUNT: 'INVALID_ARGUMENT',
  BAD_DURATION: 'INVALID_ARGUMENT',
  CONTROLLER_UNAVAILABLE: 'UNAVAILABLE',
  PERMISSION_DENIED: 'PERMISSION_DENIED',
}

// The iris code rides at the front of the status details: "[JOB_NOT_FOUND] job … does not exist".
function toRpc(err: unknown): unknown {
  if (err instanceof IrisError)
    return new RpcError(TO_RPC[err.code] ?? 'FAILED_PRECONDITION', `[${err.code}] ${err.message}`, { cause: err })
  return err
}

/** Turns an error from a controller call back into an IrisError where it carries an iris code. */
export function fromRpc(err: unknown, address: string): unknown {
  if (!(err instanceof RpcError)) return err
  const m = /^\[([A-Z_]+)\] ([\s\S]*)$/.exec(err.details)
  if (m && (IRIS_ERROR_CODES as readonly string[]).includes(m[1]!))
    return new IrisError(m[1] as IrisErrorCode, m[2]!, { cause: err })
  if (err.code === 'UNAVAILABLE' || err.code === 'DEADLINE_EXCEEDED') {
    return new IrisError(
      'CONTROLLER_UNAVAILABLE',
      `controller at ${address} did not answer (${err.code}: ` +
        `${err.details}); check that "iris controller" runs there and ` +
        `--controller points at it`,
      { cause: err },
    )
  }
  if (err.code === 'UNAUTHENTICATED') {
    return new IrisError(
      'UNAUTHENTICATED',
      `controller at ${address} refused the call: ${err.details}; pass ` +
        `the cluster token with --token-file PATH or in the variable ` +
        `--token-env names (IRIS_TOKEN by default); a local cluster ` +
        `keeps it in <prefix>/iris/token, which the CLI reads when ` +
        `MARIN_PREFIX is that prefix`,
      { cause: err },
    )
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

/** A job's spec as it leaves the controller: env names with their values replaced. */
export function publicSpec(spec: JobSpec): JobSpec {
  return { ...spec, env: Object.fromEntries(Object.keys(spec.env).map((k) => [k, REDACTED])) }
}

function publicJob(job: JobStatus): JobStatus {
  return { ...job, spec: publicSpec(job.spec) }
}

const denied = (what: string) => new IrisError('PERMISSION_DENIED', what)

/** What a caller may do: the admin everything, a job token its own job and the jobs under it. */
class Access {
  constructor(
    private readonly c: Controller,
    private readonly auth: ClusterAuth | undefined,
  ) {}

  who(ctx: CallContext): Principal {
    if (!this.auth) return ADMIN
    const p = this.auth.authenticate(ctx.metadata.get('authorization')[0])
    if ('refused' in p) throw new RpcError('UNAUTHENTICATED', p.refused)
    return p
  }

  admin(ctx: CallContext, what: string): void {
    const p = this.who(ctx)
    if (p.kind !== 'admin') throw denied(`the token of job ${p.jobId} may not ${what}; only the cluster token may`)
  }

  /** Whether `jobId` is the caller's job or one of its descendants. */
  private owns(p: Principal, jobId: string): boolean {
    if (p.kind === 'admin') return true
    let id: string | undefined = jobId
    for (let depth = 0; id !== undefined && depth < 1000; depth++) {
      if (id === p.jobId) return true
      if (!this.c.store.hasJob(id)) return false
      id = this.c.store.specOf(id).parent
    }
    return false
  }

  job(ctx: CallContext, jobId: string): Principal {
    const p = this.who(ctx)
    if (!this.owns(p, jobId))
      throw denied(
        `the token of job ${(p as { jobId: string }).jobId} may not ` +
          `reach job ${jobId}; a task's token opens its own job and the ` +
          `jobs it submitted`,
      )
    return p
  }

  /** The spec to store for a submit by `p`: a job's submit becomes a child of that job. */
  submission(ctx: CallContext, spec: JobSpec): { spec: JobSpec; principal: Principal } {
    const p = this.who(ctx)
    if (p.kind === 'admin') return { spec, principal: p }
    const parent = this.c.store.hasJob(p.jobId) ? this.c.getJob(p.jobId) : undefined
    if (!parent?.spec.allowChildren)
      throw denied(
        `job ${p.jobId} may not submit jobs; submit it with ` +
          `allowChildren (iris submit --allow-children) to let its tasks do so`,
      )
    if (isFinalJobState(parent.state))
      throw denied(`job ${p.jobId} is ${parent.state}; a finished job submits no more children`)
    return { spec: { ...spec, parent: p.jobId }, principal: p }
  }

  visible(p: Principal, jobs: JobStatus[]): JobStatus[] {
    return p.kind === 'admin' ? jobs : jobs.filter((j) => this.owns(p, j.jobId))
  }
}

/** The service implementation over an in-process controller; with `auth`, every call must carry a token it accepts. */
export function controllerImpl(c: Controller, auth?: ClusterAuth) {
  const access = new Access(c, auth)
  return {
    submit: guard(({ spec, requestId }: { spec: JobSpec; requestId?: string }, ctx: CallContext) => {
      const s = access.submission(ctx, spec)
      // Request ids are per caller: another caller's id never returns that caller's job.
      const key =
        requestId === undefined
          ? undefined
          : `${s.principal.kind === 'admin' ? 'admin' : `job:${s.principal.jobId}`}/${requestId}`
      return { jobId: c.submit(s.spec, key === undefined ? {} : { requestId: key }) }
    }),
    getJob: guard(({ jobId }: { jobId: string }, ctx: CallContext) => {
      access.job(ctx, jobId)
      return { job: publicJob(c.getJob(jobId)), attempts: c.getAttempts(jobId) }
    }),
    waitJob: guard(async ({ jobId, waitMs }: { jobId: string; waitMs: number }, ctx: CallContext) => {
      access.job(ctx, jobId)
      const signal = AbortSignal.any([ctx.signal, AbortSignal.timeout(waitMs)])
      try {
        return { job: publicJob(await c.waitForJob(jobId, { signal })) }
      } catch (e) {
        // The wait ran out: answer with the job as it is now.
        if (signal.aborted && !ctx.signal.aborted && isIrisError(e, 'TIMEOUT'))
          return { job: publicJob(c.getJob(jobId)) }
        throw e
      }
    }),
    listJobs: guard((req: { states?: JobState[]; limit?: number }, ctx: CallContext) => {
      const p = access.who(ctx)
      const states = req.states ? { states: req.states } : {}
      const jobs =
        p.kind === 'admin'
          ? c.listJobs({ ...states, ...(req.limit ? { limit: req.limit } : {}) })
          : access.visible(p, c.listJobs(states)).slice(0, req.limit ?? 1000)
      return { jobs: jobs.map(publicJob) }
    }),
    kill: guard(({ jobId }: { jobId: string }, ctx: CallContext) => {
      access.job(ctx, jobId)
      return { state: c.kill(jobId) }
    }),
    listWorkers: guard((_req: Record<string, never>, ctx: CallContext) => {
      access.admin(ctx, 'list workers')
      return { workers: c.listWorkers() }
    }),
    logs: async function* (
      req: { jobId: string; afterSeq?: number; sinceTs?: number; taskIndex?: number; follow?: boolean },
      ctx: CallContext,
    ) {
      try {
        access.job(ctx, req.jobId)
        const opts = {
          ...(req.afterSeq !== undefined ? { afterSeq: req.afterSeq } : {}),
          ...(req.sinceTs !== undefined ? { sinceTs: req.sinceTs } : {}),
          ...(req.taskIndex !== undefined ? { taskIndex: req.taskIndex } : {}),
        }
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
    register: guard((req: Parameters<Controller['registerWorker']>[0], ctx: CallContext) => {
      access.admin(ctx, 'register a worker')
      return c.registerWorker(req)
    }),
    heartbeat: guard((req: Parameters<Controller['heartbeat']>[0], ctx: CallContext) => {
      access.admin(ctx, 'heartbeat as a worker')
      return c.heartbeat(req, ctx.signal)
    }),
    report: guard((req: Parameters<Controller['report']>[0], ctx: CallContext) => {
      access.admin(ctx, 'report as a worker')
      return c.report(req)
    }),
  }
}
