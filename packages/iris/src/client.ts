/** @module `IrisClient`: submit, status, wait, logs and kill against a controller over gRPC. */
import { randomUUID } from 'node:crypto'
import { connect, RpcError, type ClientTlsOptions, type DuckyClient } from '@marin/ducky'
import { ControllerService, fromRpc } from './controller-service.js'
import { parseDuration } from './duration.js'
import { IrisError, isIrisError } from './errors.js'
import { normalizeAddress } from './grpc-link.js'
import { resolveJobRequest, type JobRequest, type JobSpec } from './job-spec.js'
import type { AttemptStatus, JobStatus, LogLine, WorkerStatus } from './records.js'
import { isFinalJobState, type JobState } from './states.js'

export type IrisClientOptions = {
  /** `host:port` of the controller (a scheme such as `http://` is ignored). */
  controller: string
  /** The cluster token, or a task's job token (IRIS_TOKEN), when the controller requires one. */
  token?: string
  /** Talk TLS: the CA that signed the controller's certificate (`caFile`), and optionally the name to check. @default
   * plaintext */
  tls?: ClientTlsOptions
  /** Deadline of each call. @default 30000 */
  deadlineMs?: number
  /**
   * How long `submit` keeps retrying while the controller is unreachable. Every try carries
   * the same request id, so a retry never makes a second job. @default 60000
   */
  submitRetryMs?: number
}

export type LogsOptions = {
  /** Keep streaming until the job ends. */
  follow?: boolean
  /** Only lines this recent: a duration (`'5m'`) or milliseconds. */
  since?: string | number
  /** Only this task's lines. */
  taskIndex?: number
}

export type WaitOptions = {
  /** Give up after this long (IrisError TIMEOUT). @default forever */
  timeoutMs?: number
  /** First pause after a failed call (the controller restarting); it grows to 1 s. @default 50 */
  pollMs?: number
  signal?: AbortSignal
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/**
 * A client of one controller.
 * @example
 * const iris = new IrisClient({ controller: '127.0.0.1:10000' })
 * const id = await iris.submit({ name: 'hello', command: ['echo', 'hi'] })
 * const job = await iris.wait(id) // job.state === 'SUCCEEDED'
 */
export class IrisClient {
  readonly address: string
  private readonly rpc: DuckyClient<typeof ControllerService>
  private readonly submitRetryMs: number

  constructor(opts: IrisClientOptions) {
    this.address = normalizeAddress(opts.controller)
    this.submitRetryMs = opts.submitRetryMs ?? 60_000
    this.rpc = connect(ControllerService, this.address, {
      ...(opts.token ? { token: opts.token } : {}),
      ...(opts.tls ? { tls: opts.tls } : {}),
      deadlineMs: opts.deadlineMs ?? 30_000,
    })
  }

  private async call<T>(p: Promise<T>): Promise<T> {
    try {
      return await p
    } catch (e) {
      throw fromRpc(e, this.address)
    }
  }

  /**
   * Submits a job and returns its id. While the controller is unreachable (restarting, or
   * its answer lost) the call is retried for up to `submitRetryMs` with one request id, so
   * the controller makes the job once however many tries reach it.
   */
  async submit(req: JobRequest | JobSpec): Promise<string> {
    const spec = resolveJobRequest(req as JobRequest)
    const requestId = randomUUID()
    const deadline = Date.now() + this.submitRetryMs
    let delay = 50
    for (;;) {
      try {
        return (await this.call(this.rpc.submit({ spec, requestId }))).jobId
      } catch (e) {
        // A controller going down cancels the calls it holds (CANCELLED): as retryable as no answer.
        const transient = isIrisError(e, 'CONTROLLER_UNAVAILABLE') || (e instanceof RpcError && e.code === 'CANCELLED')
        if (!transient || Date.now() + delay > deadline) throw e
        await sleep(delay)
        delay = Math.min(1000, delay * 2)
      }
    }
  }

  async status(jobId: string): Promise<JobStatus> {
    return (await this.call(this.rpc.getJob({ jobId }))).job as JobStatus
  }

  async attempts(jobId: string): Promise<AttemptStatus[]> {
    return (await this.call(this.rpc.getJob({ jobId }))).attempts as AttemptStatus[]
  }

  /** Jobs, newest first. */
  async list(opts: { states?: JobState[]; limit?: number } = {}): Promise<JobStatus[]> {
    return (await this.call(this.rpc.listJobs(opts))).jobs as JobStatus[]
  }

  async workers(): Promise<WorkerStatus[]> {
    return (await this.call(this.rpc.listWorkers({}))).workers as WorkerStatus[]
  }

  /** Kills a job; returns its state afterwards (KILLED, or the final state it had already reached). */
  async kill(jobId: string): Promise<JobState> {
    return (await this.call(this.rpc.kill({ jobId }))).state
  }

  /**
   * Waits until the job is final, with long polls (no busy polling). Survives
   * controller restarts: while the controller is unreachable it keeps trying
   * until `timeoutMs`.
   */
  async wait(jobId: string, opts: WaitOptions = {}): Promise<JobStatus> {
    const deadline = opts.timeoutMs === undefined ? Infinity : Date.now() + opts.timeoutMs
    let delay = opts.pollMs ?? 50
    let last: JobStatus | undefined
    for (;;) {
      const left = deadline - Date.now()
      try {
        const waitMs = Math.max(0, Math.min(20_000, left))
        last = (
          await this.call(
            this.rpc.waitJob(
              { jobId, waitMs },
              { deadlineMs: waitMs + 10_000, ...(opts.signal ? { signal: opts.signal } : {}) },
            ),
          )
        ).job as JobStatus
        if (isFinalJobState(last.state)) return last
      } catch (e) {
        if (!isIrisError(e, 'CONTROLLER_UNAVAILABLE')) throw e
        await sleep(Math.min(delay, Math.max(0, left)))
        delay = Math.min(1000, delay * 1.5)
      }
      if (opts.signal?.aborted || Date.now() >= deadline) {
        throw new IrisError(
          'TIMEOUT',
          `job ${jobId}: still ${last?.state ?? 'unknown'} after waiting; ` +
            `wait longer or check "iris status ${jobId}"`,
        )
      }
    }
  }

  /** The job's log lines in order; with `follow`, new lines as they come until the job ends. */
  async *logs(jobId: string, opts: LogsOptions = {}): AsyncGenerator<LogLine> {
    const since =
      opts.since === undefined
        ? undefined
        : typeof opts.since === 'number'
          ? opts.since
          : parseDuration(opts.since, 'since')
    const stream = this.rpc.logs({
      jobId,
      ...(since !== undefined ? { sinceTs: Date.now() - since } : {}),
      ...(opts.taskIndex !== undefined ? { taskIndex: opts.taskIndex } : {}),
      ...(opts.follow ? { follow: true } : {}),
    })
    try {
      for await (const l of stream) yield l as LogLine
    } catch (e) {
      throw fromRpc(e, this.address)
    }
  }

  close(): void {
    this.rpc.close()
  }
}
