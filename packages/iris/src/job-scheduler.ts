/**
 * @module `JobScheduler`: submit job requests (one, or anything that yields
 * them, such as marin's `Experiment`) to a local cluster or a controller, and
 * get handles to wait on.
 */
import type { ClientTlsOptions } from '@marin/ducky'
import { localMarinPrefix } from '@marin/rigging'
import { IrisClient, type LogsOptions, type WaitOptions } from './client.js'
import { readTokenFile } from './credentials.js'
import { IrisError } from './errors.js'
import { SUBMIT_TO } from './submit-to.js'
import type { JobRequest } from './job-spec.js'
import { LocalCluster, type LocalClusterOptions } from './local-cluster.js'
import type { JobStatus, LogLine } from './records.js'
import type { JobState } from './states.js'

/** A source that submits its own jobs to the scheduler and resolves with their handles. */
export type SelfSubmitting = { [SUBMIT_TO](scheduler: JobScheduler): Promise<JobHandle[]> }

/** One job request, anything that yields job requests, or a source that submits its own (an Experiment). */
export type JobSource =
  | JobRequest
  | Iterable<JobRequest>
  | AsyncIterable<JobRequest>
  | (() => Iterable<JobRequest> | AsyncIterable<JobRequest>)
  | SelfSubmitting

function isSelfSubmitting(x: unknown): x is SelfSubmitting {
  return typeof x === 'object' && x !== null && typeof (x as Record<symbol, unknown>)[SUBMIT_TO] === 'function'
}

export type JobSchedulerOptions = {
  /** `'local'` starts a cluster in this process; anything else is a controller address. @default 'local' */
  cluster?: 'local' | string
  /** For a controller address: its cluster token. @default $IRIS_TOKEN, else the file in $IRIS_TOKEN_FILE; a local
   * cluster uses its own */
  token?: string
  /** For a controller address: TLS with this CA. @default { caFile: $IRIS_TLS_CA } when that is set */
  tls?: ClientTlsOptions
  /** For `'local'`: where its state lives (`<prefix>/iris`). @default $MARIN_PREFIX or ./.marin */
  prefix?: string
  /** For `'local'`: more options of the local cluster. */
  local?: Omit<LocalClusterOptions, 'prefix' | 'token'>
}

/** A submitted job. */
export type JobHandle = {
  readonly jobId: string
  readonly name: string
  /** Resolves with the final status (SUCCEEDED, FAILED, KILLED or UNSCHEDULABLE); never rejects on job failure. */
  wait(opts?: WaitOptions): Promise<JobStatus>
  status(): Promise<JobStatus>
  logs(opts?: LogsOptions): AsyncGenerator<LogLine>
  kill(): Promise<JobState>
}

function isRequest(x: unknown): x is JobRequest {
  return typeof x === 'object' && x !== null && 'command' in x && 'name' in x && !(Symbol.iterator in x)
}

async function* requestsOf(src: Exclude<JobSource, SelfSubmitting>): AsyncGenerator<JobRequest> {
  if (typeof src === 'function') return yield* requestsOf(src())
  if (isRequest(src)) return yield src
  if (typeof src === 'object' && src !== null && Symbol.asyncIterator in src) {
    for await (const r of src as AsyncIterable<JobRequest>) yield r
    return
  }
  if (typeof src !== 'object' || src === null || !(Symbol.iterator in src))
    throw new IrisError(
      'BAD_REQUEST',
      `JobScheduler.submit: got ${src === null ? 'null' : typeof src}${describe(src)}; pass a job request ` +
        '({ name, command }), an iterable of them, a function returning one, or a marin Experiment',
    )
  yield* src as Iterable<JobRequest>
}

function describe(x: unknown): string {
  if (typeof x !== 'object' || x === null) return ''
  const keys = Object.keys(x).slice(0, 5)
  return keys.length ? ` with keys ${keys.join(', ')}` : ''
}

/**
 * @example
 * const scheduler = new JobScheduler({ cluster: 'local' })
 * const [job] = await scheduler.submit({ name: 'hello', command: ['echo', 'hi'] })
 * console.log((await job.wait()).state)
 * await scheduler.close()
 */
export class JobScheduler {
  private clientPromise: Promise<IrisClient> | undefined
  private local: LocalCluster | undefined

  constructor(readonly opts: JobSchedulerOptions = {}) {}

  /** The client, starting the local cluster on first use. */
  client(): Promise<IrisClient> {
    this.clientPromise ??= (async () => {
      const cluster = this.opts.cluster ?? 'local'
      if (cluster !== 'local') {
        const env = process.env
        const token =
          this.opts.token ??
          (env.IRIS_TOKEN || (env.IRIS_TOKEN_FILE ? readTokenFile(env.IRIS_TOKEN_FILE, 'IRIS_TOKEN_FILE') : undefined))
        const tls = this.opts.tls ?? (env.IRIS_TLS_CA ? { caFile: env.IRIS_TLS_CA } : undefined)
        return new IrisClient({ controller: cluster, ...(token ? { token } : {}), ...(tls ? { tls } : {}) })
      }
      const prefix = localMarinPrefix({ prefix: this.opts.prefix })
      this.local = await LocalCluster.start({
        ...(this.opts.local ?? {}),
        prefix,
        ...(this.opts.token ? { token: this.opts.token } : {}),
      })
      return this.local.client()
    })()
    return this.clientPromise
  }

  /**
   * Submits every request `src` yields, in order; returns one handle per job. A source that submits
   * its own jobs (a marin Experiment) does so here: the call resolves once it is done, with the
   * handles of the jobs it ran (steps already done run no job).
   */
  async submit(src: JobSource): Promise<JobHandle[]> {
    if (isSelfSubmitting(src)) return src[SUBMIT_TO](this)
    const client = await this.client()
    const handles: JobHandle[] = []
    for await (const req of requestsOf(src)) {
      const jobId = await client.submit(req)
      handles.push({
        jobId,
        name: req.name,
        wait: (o) => client.wait(jobId, o),
        status: () => client.status(jobId),
        logs: (o) => client.logs(jobId, o),
        kill: () => client.kill(jobId),
      })
    }
    return handles
  }

  /** Closes the client and, for a local cluster, stops it (killing tasks still running). */
  async close(): Promise<void> {
    if (!this.clientPromise) return
    const client = await this.clientPromise
    client.close()
    await this.local?.stop()
  }
}
