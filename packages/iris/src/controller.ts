/**
 * @module The controller: the one process that holds iris's state. It accepts jobs,
 * runs the scheduler, hands attempts to workers through their heartbeats (a long
 * poll, so new work starts at once), applies what workers report, and declares a
 * worker lost when it stops heartbeating.
 *
 * Everything here is in-process; `controller-service.ts` puts it on gRPC.
 */
import { EventEmitter } from 'node:events'
import { logger } from '@marin/rigging'
import { IrisError } from './errors.js'
import type { JobSpec } from './job-spec.js'
import type { AttemptReport, LogInput, TaskAssignment } from './protocol.js'
import type { AttemptStatus, JobStatus, LogLine, WorkerStatus } from './records.js'
import { addResources, subtractResources, type Resources } from './resources.js'
import { neverFitsReason, schedule, type PendingTask, type Unschedulable, type WorkerView } from './scheduler.js'
import { StateStore, type Transition } from './state-store.js'
import { isFinalAttemptState, isFinalJobState, type JobState } from './states.js'

const log = logger('iris')

/** How many tasks at the head of the queue one scheduling pass considers for placement. */
const SCHEDULE_WINDOW = 512

export type ControllerOptions = {
  /** The SQLite state file; `:memory:` for a throwaway controller. */
  statePath: string
  /** How long a worker's heartbeat may wait for work before returning. @default 5000 */
  heartbeatMs?: number
  /** A worker silent for this long is lost and its tasks are retried. @default 30000 */
  workerTimeoutMs?: number
  /** The address tasks see as IRIS_CONTROLLER; set by `serve` once the port is known. */
  address?: string
  /** Mints the token a job's tasks get as IRIS_TOKEN; without it tasks get none (an open controller). */
  jobToken?: (jobId: string) => string
}

export type RegisterInput = {
  workerId: string
  address: string
  resources: Resources
  docker: boolean
  dockerReason?: string
  attempts: AttemptReport[]
}

/** Splits `job/task/attempt` ids; job ids never contain '/'. */
export function parseAttemptId(attemptId: string): { jobId: string; taskIndex: number; attempt: number } | undefined {
  const m = /^([^/]+)\/(\d+)\/(\d+)$/.exec(attemptId)
  return m ? { jobId: m[1]!, taskIndex: Number(m[2]), attempt: Number(m[3]) } : undefined
}

export class Controller {
  readonly store: StateStore
  readonly heartbeatMs: number
  readonly workerTimeoutMs: number
  address: string
  private readonly jobToken: ((jobId: string) => string) | undefined
  private readonly lastSeen = new Map<string, number>()
  private readonly killsSent = new Set<string>()
  private readonly waiters = new Map<string, Set<() => void>>()
  private readonly events = new EventEmitter()
  private scheduleQueued = false
  private sweepTimer: NodeJS.Timeout | undefined
  private closed = false

  constructor(opts: ControllerOptions) {
    this.store = new StateStore(opts.statePath)
    this.heartbeatMs = opts.heartbeatMs ?? 5000
    this.workerTimeoutMs = opts.workerTimeoutMs ?? 30_000
    this.address = opts.address ?? ''
    this.jobToken = opts.jobToken
    this.events.setMaxListeners(0)
    // After a restart every known worker gets a full timeout to come back and
    // report what it runs; only then are its tasks retried elsewhere.
    const now = Date.now()
    for (const w of this.store.listWorkers('ALIVE')) this.lastSeen.set(w.workerId, now)
    this.sweepTimer = setInterval(() => this.sweep(), Math.max(50, Math.min(1000, this.workerTimeoutMs / 4)))
    this.sweepTimer.unref()
    this.requestSchedule()
  }

  // ---- client API ---------------------------------------------------------

  /** Stores a job; a `requestId` seen before returns that request's job instead of a new one. */
  submit(spec: JobSpec, opts: { requestId?: string } = {}): string {
    this.assertOpen()
    const jobId = this.store.insertJob(spec, Date.now(), opts.requestId)
    log.info(
      { jobId, replicas: spec.replicas, priority: spec.priority, ...(spec.parent ? { parent: spec.parent } : {}) },
      'job submitted',
    )
    this.requestSchedule()
    return jobId
  }

  getJob(jobId: string): JobStatus {
    return this.store.getJob(jobId)
  }

  getAttempts(jobId: string): AttemptStatus[] {
    this.store.getJob(jobId)
    return this.store.attemptsOf(jobId)
  }

  listJobs(opts: { states?: JobState[]; limit?: number } = {}): JobStatus[] {
    return this.store.listJobs(opts)
  }

  listWorkers(): WorkerStatus[] {
    return this.store.listWorkers()
  }

  kill(jobId: string): JobState {
    const t = this.store.killJob(jobId)
    log.info({ jobId, running: t.killAttempts.length }, 'job killed')
    this.afterTransition(t)
    return t.jobState
  }

  readLogs(
    jobId: string,
    opts: { afterSeq?: number; sinceTs?: number; taskIndex?: number; limit?: number } = {},
  ): LogLine[] {
    this.store.getJob(jobId)
    return this.store.readLogs(jobId, opts)
  }

  /** Log lines as they arrive, until the job has ended and none of its attempts still runs. */
  async *followLogs(
    jobId: string,
    opts: { afterSeq?: number; sinceTs?: number; taskIndex?: number; signal?: AbortSignal } = {},
  ): AsyncGenerator<LogLine> {
    let afterSeq = opts.afterSeq ?? 0
    for (;;) {
      const wake = this.nextEvent(`logs:${jobId}`, `job:${jobId}`, 1000, opts.signal)
      const finished = this.isSettled(jobId)
      for (;;) {
        const batch = this.readLogs(jobId, { ...opts, afterSeq, limit: 1000 })
        for (const l of batch) {
          afterSeq = l.seq
          yield l
        }
        if (batch.length < 1000) break
      }
      if (finished || opts.signal?.aborted || this.closed) {
        wake.cancel()
        return
      }
      await wake.promise
    }
  }

  /** Resolves with the job once it reaches a final state. */
  async waitForJob(jobId: string, opts: { signal?: AbortSignal } = {}): Promise<JobStatus> {
    for (;;) {
      const wake = this.nextEvent(`job:${jobId}`, `job:${jobId}`, 1000, opts.signal)
      const job = this.store.getJob(jobId)
      if (isFinalJobState(job.state)) {
        wake.cancel()
        return job
      }
      if (opts.signal?.aborted)
        throw new IrisError('TIMEOUT', `job ${jobId}: stopped waiting while it was ${job.state}`)
      await wake.promise
    }
  }

  private isSettled(jobId: string): boolean {
    return isFinalJobState(this.store.getJob(jobId).state) && this.store.activeAttempts({ jobId }).length === 0
  }

  // ---- worker API ---------------------------------------------------------

  registerWorker(req: RegisterInput): { heartbeatMs: number; workerTimeoutMs: number; controller: string } {
    this.assertOpen()
    this.store.upsertWorker({
      workerId: req.workerId,
      address: req.address,
      resources: req.resources,
      docker: req.docker,
      ...(req.dockerReason ? { dockerReason: req.dockerReason } : {}),
    })
    this.lastSeen.set(req.workerId, Date.now())
    log.info({ workerId: req.workerId, resources: req.resources, docker: req.docker }, 'worker registered')
    this.checkedSeq = 0
    this.applyReports(req.workerId, req.attempts)
    this.requestSchedule()
    return { heartbeatMs: this.heartbeatMs, workerTimeoutMs: this.workerTimeoutMs, controller: this.address }
  }

  /**
   * A worker's heartbeat: applies its reports, reconciles what it holds with the
   * state, and returns attempts to start and to kill, waiting up to `waitMs` for
   * some if there are none yet.
   */
  async heartbeat(
    req: { workerId: string; attempts: AttemptReport[]; waitMs: number },
    signal?: AbortSignal,
  ): Promise<{ assign: TaskAssignment[]; kill: string[]; reregister: boolean }> {
    if (!this.isAlive(req.workerId)) {
      return {
        assign: [],
        kill: req.attempts.filter((a) => !isFinalAttemptState(a.state)).map((a) => a.attemptId),
        reregister: true,
      }
    }
    this.lastSeen.set(req.workerId, Date.now())
    this.applyReports(req.workerId, req.attempts)
    const held = new Set(req.attempts.map((a) => a.attemptId))
    this.reconcileMissing(req.workerId, held)
    let out = this.workFor(req.workerId, req.attempts, held)
    // Return at once only with news: kills already sent are repeated, but after the wait,
    // so a task that takes its grace period to die does not turn this into a busy loop.
    const newKills = out.kill.filter((id) => !this.killsSent.has(id))
    for (const id of newKills) this.killsSent.add(id)
    if (out.assign.length === 0 && newKills.length === 0 && req.waitMs > 0 && !this.closed) {
      await this.waitForWorkerWake(req.workerId, Math.min(req.waitMs, this.heartbeatMs), signal)
      if (!this.isAlive(req.workerId)) return { assign: [], kill: [], reregister: true }
      this.lastSeen.set(req.workerId, Date.now())
      out = this.workFor(req.workerId, req.attempts, held)
    }
    return { ...out, reregister: false }
  }

  /** Attempt state changes and log lines from a worker. Logs are stored before states, so a finished job has all its
   * lines. */
  report(req: { workerId: string; attempts: AttemptReport[]; logs: LogInput[]; leaving?: boolean }): {
    reregister: boolean
  } {
    const alive = this.isAlive(req.workerId)
    if (alive) this.lastSeen.set(req.workerId, Date.now())
    const lines: (Omit<LogLine, 'seq'> & { lineNo: number })[] = []
    const touched = new Set<string>()
    for (const l of req.logs) {
      const id = parseAttemptId(l.attemptId)
      if (!id || !this.store.hasJob(id.jobId)) continue
      lines.push({
        jobId: id.jobId,
        taskIndex: id.taskIndex,
        attempt: id.attempt,
        lineNo: l.lineNo,
        stream: l.stream,
        ts: l.ts,
        line: l.line,
      })
      touched.add(id.jobId)
    }
    // Output of a lost worker's attempts is still the job's output: keep it.
    this.store.appendLogs(lines)
    for (const jobId of touched) this.events.emit(`logs:${jobId}`)
    if (alive) this.applyReports(req.workerId, req.attempts)
    if (alive && req.leaving) this.loseWorker(req.workerId, `worker ${req.workerId} shut down`)
    return { reregister: !alive }
  }

  // ---- internals ----------------------------------------------------------

  private isAlive(workerId: string): boolean {
    return this.lastSeen.has(workerId)
  }

  private applyReports(workerId: string, reports: readonly AttemptReport[]): void {
    let changed = false
    for (const r of reports) {
      const a = this.store.getAttempt(r.attemptId)
      if (!a || a.workerId !== workerId || isFinalAttemptState(a.state)) continue
      if (r.state === 'RUNNING' && a.state === 'ASSIGNED') {
        this.store.markRunning(r.attemptId)
        this.events.emit(`job:${a.jobId}`)
      } else if (r.state === 'ASSIGNED' && a.state === 'ASSIGNED' && r.error !== a.error) {
        // Why a started attempt waits (a Kubernetes Pod still Pending).
        this.store.noteWaiting(r.attemptId, r.error)
        this.events.emit(`job:${a.jobId}`)
      } else if (isFinalAttemptState(r.state)) {
        this.killsSent.delete(r.attemptId)
        const outcome = {
          ...(r.exitCode !== undefined ? { exitCode: r.exitCode } : {}),
          ...(r.error !== undefined ? { error: r.error } : {}),
        }
        const t = this.store.finishAttempt(r.attemptId, r.state, outcome)
        log.debug({ attemptId: r.attemptId, state: r.state, exitCode: r.exitCode }, 'attempt finished')
        if (t) this.afterTransition(t)
        changed = true
      }
    }
    if (changed) this.requestSchedule()
  }

  // Attempts the state gives this worker but the worker does not hold: never
  // started ones are sent again by workFor; started ones were lost with a
  // previous run of the worker; ones of ended jobs are simply closed.
  private reconcileMissing(workerId: string, held: ReadonlySet<string>): void {
    for (const a of this.store.activeAttempts({ workerId })) {
      if (held.has(a.attemptId)) continue
      const jobState = this.store.getJob(a.jobId).state
      let t: Transition | undefined
      if (isFinalJobState(jobState)) t = this.store.finishAttempt(a.attemptId, 'KILLED', { error: `job ${jobState}` })
      else if (a.state === 'RUNNING')
        t = this.store.finishAttempt(a.attemptId, 'WORKER_FAILED', { error: `worker ${workerId} no longer runs it` })
      if (t) this.afterTransition(t)
    }
  }

  private workFor(
    workerId: string,
    reports: readonly AttemptReport[],
    held: ReadonlySet<string>,
  ): { assign: TaskAssignment[]; kill: string[] } {
    const assign: TaskAssignment[] = []
    for (const a of this.store.activeAttempts({ workerId })) {
      if (a.state !== 'ASSIGNED' || held.has(a.attemptId)) continue
      const job = this.store.getJob(a.jobId)
      if (isFinalJobState(job.state)) continue
      const attempt = parseAttemptId(a.attemptId)!.attempt
      assign.push({
        attemptId: a.attemptId,
        jobId: a.jobId,
        taskIndex: a.taskIndex,
        attempt,
        numTasks: job.spec.replicas,
        spec: job.spec,
        ...(this.jobToken ? { token: this.jobToken(a.jobId) } : {}),
      })
    }
    const kill: string[] = []
    for (const r of reports) {
      if (isFinalAttemptState(r.state)) continue
      const a = this.store.getAttempt(r.attemptId)
      if (
        !a ||
        a.workerId !== workerId ||
        isFinalAttemptState(a.state) ||
        isFinalJobState(this.store.getJob(a.jobId).state)
      )
        kill.push(r.attemptId)
    }
    return { assign, kill }
  }

  private afterTransition(t: Transition): void {
    this.events.emit(`job:${t.jobId}`)
    for (const a of t.killAttempts) this.wake(a.workerId)
    if (isFinalJobState(t.jobState)) log.info({ jobId: t.jobId, state: t.jobState }, 'job finished')
  }

  private wake(workerId: string): void {
    const set = this.waiters.get(workerId)
    if (!set) return
    this.waiters.delete(workerId)
    for (const fn of set) fn()
  }

  private waitForWorkerWake(workerId: string, ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      let set = this.waiters.get(workerId)
      if (!set) this.waiters.set(workerId, (set = new Set()))
      const done = () => {
        clearTimeout(timer)
        signal?.removeEventListener('abort', done)
        set!.delete(done)
        resolve()
      }
      const timer = setTimeout(done, ms)
      signal?.addEventListener('abort', done, { once: true })
      set.add(done)
    })
  }

  private nextEvent(
    a: string,
    b: string,
    ms: number,
    signal?: AbortSignal,
  ): { promise: Promise<void>; cancel: () => void } {
    let cancel = () => {}
    const promise = new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer)
        this.events.off(a, done)
        this.events.off(b, done)
        signal?.removeEventListener('abort', done)
        resolve()
      }
      const timer = setTimeout(done, ms)
      this.events.on(a, done)
      if (b !== a) this.events.on(b, done)
      signal?.addEventListener('abort', done, { once: true })
      cancel = done
    })
    return { promise, cancel }
  }

  /** Runs the scheduler soon, once, however many events asked for it. */
  requestSchedule(): void {
    if (this.scheduleQueued || this.closed) return
    this.scheduleQueued = true
    setImmediate(() => {
      this.scheduleQueued = false
      if (this.closed) return
      try {
        this.runSchedule()
      } catch (err) {
        log.error({ err }, 'scheduling pass failed')
      }
    })
  }

  /** Tasks of jobs up to this sequence were checked for fit-ever against the current workers. */
  private checkedSeq = 0

  // Only the head of the queue can be placed, so a pass reads a window of it; the
  // fit-ever check is needed once per task per set of workers, so only new jobs get it.
  private runSchedule(): void {
    const window = this.store.pendingTasks({ limit: SCHEDULE_WINDOW })
    const fresh = this.store.pendingTasks({ afterSeq: this.checkedSeq })
    if (window.length === 0 && fresh.length === 0) return
    const alive = this.store.listWorkers('ALIVE').filter((w) => this.lastSeen.has(w.workerId))
    const used = new Map<string, Resources>()
    for (const a of this.store.activeAttempts())
      used.set(a.workerId, addResources(used.get(a.workerId) ?? { cpu: 0, memory: 0, gpu: 0 }, a.resources))
    const workers: WorkerView[] = alive.map((w) => ({
      workerId: w.workerId,
      total: w.resources,
      free: subtractResources(w.resources, used.get(w.workerId) ?? { cpu: 0, memory: 0, gpu: 0 }),
      docker: w.docker,
      ...(w.dockerReason ? { dockerReason: w.dockerReason } : {}),
    }))
    const toTask = (p: (typeof window)[number]): PendingTask => ({
      jobId: p.jobId,
      taskIndex: p.taskIndex,
      priority: p.spec.priority,
      submitSeq: p.seq,
      resources: p.spec.resources,
      needsDocker: p.spec.image !== undefined,
    })
    const tasks = window.map(toTask)
    const inWindow = new Set(window.map((p) => `${p.jobId}/${p.taskIndex}`))
    const extra: Unschedulable[] = []
    for (const p of fresh) {
      if (inWindow.has(`${p.jobId}/${p.taskIndex}`)) continue
      const reason = neverFitsReason(toTask(p), workers)
      if (reason !== undefined) extra.push({ jobId: p.jobId, taskIndex: p.taskIndex, reason })
    }
    // With no worker nothing was decided; check again once workers come.
    if (workers.length > 0) for (const p of fresh) this.checkedSeq = Math.max(this.checkedSeq, p.seq)
    const decision = schedule({ pending: tasks, workers })
    const woken = new Set<string>()
    for (const a of decision.assign) {
      if (this.store.assign(a.jobId, a.taskIndex, a.workerId)) woken.add(a.workerId)
    }
    for (const u of [...decision.unschedulable, ...extra]) {
      const t = this.store.markUnschedulable(u.jobId, u.taskIndex, u.reason)
      if (t) {
        log.warn({ jobId: u.jobId, taskIndex: u.taskIndex, reason: u.reason }, 'task unschedulable')
        this.afterTransition(t)
      }
    }
    for (const w of woken) this.wake(w)
  }

  private sweep(): void {
    const now = Date.now()
    for (const [workerId, seen] of this.lastSeen) {
      if (now - seen <= this.workerTimeoutMs) continue
      this.loseWorker(workerId, `worker ${workerId} stopped heartbeating (silent for ${now - seen} ms)`)
    }
  }

  private loseWorker(workerId: string, reason: string): void {
    this.lastSeen.delete(workerId)
    // Less capacity: pending tasks that fit before may fit nowhere now.
    this.checkedSeq = 0
    if (reason.endsWith('shut down')) log.info({ workerId }, 'worker left')
    else log.warn({ workerId, reason }, 'worker lost')
    for (const t of this.store.markWorkerLost(workerId, reason)) this.afterTransition(t)
    this.wake(workerId)
    this.requestSchedule()
  }

  private assertOpen(): void {
    if (this.closed) throw new IrisError('CONTROLLER_UNAVAILABLE', 'the controller is shut down; start it again')
  }

  close(): void {
    if (this.closed) return
    this.closed = true
    clearInterval(this.sweepTimer)
    for (const w of [...this.waiters.keys()]) this.wake(w)
    this.events.emit('close')
    this.store.close()
  }
}
