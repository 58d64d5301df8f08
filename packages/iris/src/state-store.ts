/**
 * @module The controller's state in SQLite: jobs, their tasks, attempts, workers and log lines.
 *
 * Every transition is one transaction, so a controller killed at any instant
 * restarts into a consistent state. The store enforces the job and task state
 * machine; the controller decides when to call it.
 */
import { randomBytes } from 'node:crypto'
import type Database from 'better-sqlite3'
import { IrisError } from './errors.js'
import { parseJobSpec, type JobSpec } from './job-spec.js'
import type { AttemptStatus, JobStatus, LogLine, TaskStatus, WorkerStatus } from './records.js'
import type { Resources } from './resources.js'
import { openStateDb } from './state-schema.js'
import { isFinalAttemptState, isFinalJobState, isFinalTaskState, type AttemptState, type JobState } from './states.js'

type Row = Record<string, unknown>
const opt = <T>(v: unknown): T | undefined => (v === null || v === undefined ? undefined : (v as T))

/** A running attempt plus what it holds, for building scheduler snapshots. */
export type ActiveAttempt = {
  attemptId: string
  jobId: string
  taskIndex: number
  workerId: string
  state: AttemptState
  resources: Resources
}

/** What changed when an attempt ended: attempts of the same job that must now be killed. */
export type Transition = { jobId: string; jobState: JobState; killAttempts: ActiveAttempt[] }

export class StateStore {
  readonly db: Database.Database
  // Specs never change once stored; parsing them on every scheduling pass would dominate its cost.
  private readonly specs = new Map<string, JobSpec>()

  constructor(readonly path: string) {
    this.db = openStateDb(path)
  }

  private readonly statements = new Map<string, Database.Statement>()
  // Preparing a statement costs more than running most of these; keep each one.
  private stmt(sql: string): Database.Statement {
    let s = this.statements.get(sql)
    if (!s) this.statements.set(sql, (s = this.db.prepare(sql)))
    return s
  }

  close(): void {
    this.db.close()
  }

  // ---- jobs ---------------------------------------------------------------

  /**
   * Stores a new job with `spec.replicas` PENDING tasks and returns its id. With a
   * `requestId` already seen, returns the job that request made instead (a retried submit).
   */
  insertJob(spec: JobSpec, now = Date.now(), requestId?: string): string {
    let jobId = `${spec.name}-${randomBytes(4).toString('hex')}`
    this.db.transaction(() => {
      if (requestId !== undefined) {
        const seen = this.stmt('SELECT job_id FROM submit_requests WHERE request_id = ?').get(requestId) as
          | { job_id: string }
          | undefined
        if (seen) {
          jobId = seen.job_id
          return
        }
        this.stmt('INSERT INTO submit_requests (request_id, job_id, at) VALUES (?, ?, ?)').run(requestId, jobId, now)
      }
      const seq = (this.stmt('SELECT COALESCE(MAX(seq), 0) + 1 AS s FROM jobs').get() as { s: number }).s
      this.stmt(
        'INSERT INTO jobs (job_id, seq, name, state, priority, spec, submitted_at) VALUES (?, ?, ?, ?, ?, ?, ?)',
      ).run(jobId, seq, spec.name, 'PENDING', spec.priority, JSON.stringify(spec), now)
      const ins = this.stmt(`INSERT INTO tasks (job_id, task_index, state) VALUES (?, ?, 'PENDING')`)
      for (let i = 0; i < spec.replicas; i++) ins.run(jobId, i)
    })()
    return jobId
  }

  getJob(jobId: string): JobStatus {
    const row = this.stmt('SELECT * FROM jobs WHERE job_id = ?').get(jobId) as Row | undefined
    if (!row) throw new IrisError('JOB_NOT_FOUND', `job "${jobId}" does not exist; run "iris list" to see job ids`)
    return this.toJob(row, this.tasksOf(jobId))
  }

  hasJob(jobId: string): boolean {
    return this.stmt('SELECT 1 FROM jobs WHERE job_id = ?').get(jobId) !== undefined
  }

  /** Jobs newest first, optionally only some states. */
  listJobs(opts: { states?: readonly string[]; limit?: number } = {}): JobStatus[] {
    const where = opts.states?.length ? `WHERE state IN (${opts.states.map(() => '?').join(',')})` : ''
    const rows = this.stmt(`SELECT * FROM jobs ${where} ORDER BY seq DESC LIMIT ?`).all(
      ...(opts.states ?? []),
      opts.limit ?? 1000,
    ) as Row[]
    return rows.map((r) => this.toJob(r, this.tasksOf(String(r.job_id))))
  }

  /** Counts of jobs per state. */
  jobCounts(): Record<string, number> {
    const rows = this.stmt('SELECT state, COUNT(*) AS n FROM jobs GROUP BY state').all() as {
      state: string
      n: number
    }[]
    return Object.fromEntries(rows.map((r) => [r.state, r.n]))
  }

  private tasksOf(jobId: string): TaskStatus[] {
    return (this.stmt('SELECT * FROM tasks WHERE job_id = ? ORDER BY task_index').all(jobId) as Row[]).map((t) => ({
      taskIndex: Number(t.task_index),
      state: t.state as TaskStatus['state'],
      attempts: Number(t.attempts),
      failures: Number(t.failures),
      workerLosses: Number(t.worker_losses),
      ...(t.worker_id != null ? { workerId: String(t.worker_id) } : {}),
      ...(t.exit_code != null ? { exitCode: Number(t.exit_code) } : {}),
      ...(t.error != null ? { error: String(t.error) } : {}),
    }))
  }

  private toJob(r: Row, tasks: TaskStatus[]): JobStatus {
    const job: JobStatus = {
      jobId: String(r.job_id),
      name: String(r.name),
      state: r.state as JobState,
      priority: r.priority as JobStatus['priority'],
      spec: this.specOf(String(r.job_id)),
      submittedAt: Number(r.submitted_at),
      tasks,
    }
    const s = opt<number>(r.started_at),
      f = opt<number>(r.finished_at),
      e = opt<number>(r.exit_code),
      err = opt<string>(r.error)
    if (s !== undefined) job.startedAt = s
    if (f !== undefined) job.finishedAt = f
    if (e !== undefined) job.exitCode = e
    if (err !== undefined) job.error = err
    return job
  }

  /** The stored spec of a job (cached: specs are immutable). */
  specOf(jobId: string): JobSpec {
    let spec = this.specs.get(jobId)
    if (!spec) {
      const row = this.stmt('SELECT spec FROM jobs WHERE job_id = ?').get(jobId) as Row | undefined
      if (!row) throw new IrisError('JOB_NOT_FOUND', `job "${jobId}" does not exist; run "iris list" to see job ids`)
      spec = parseJobSpec(JSON.parse(String(row.spec)))
      this.specs.set(jobId, spec)
    }
    return spec
  }

  /**
   * Pending tasks in the order the scheduler considers them (band, then submit
   * order, then task index): the first `limit`, or those of jobs after `afterSeq`.
   */
  pendingTasks(
    opts: { limit?: number; afterSeq?: number } = {},
  ): { jobId: string; taskIndex: number; seq: number; spec: JobSpec }[] {
    const rows = this.stmt(
      `SELECT t.job_id, t.task_index, j.seq FROM tasks t JOIN jobs j ON j.job_id = t.job_id
       WHERE t.state = 'PENDING' AND j.seq > @afterSeq
       ORDER BY CASE j.priority WHEN 'production' THEN 0 WHEN 'interactive' THEN 1 ELSE 2 END, j.seq, t.task_index
         LIMIT @limit`,
    ).all({ afterSeq: opts.afterSeq ?? 0, limit: opts.limit ?? -1 }) as Row[]
    return rows.map((r) => ({
      jobId: String(r.job_id),
      taskIndex: Number(r.task_index),
      seq: Number(r.seq),
      spec: this.specOf(String(r.job_id)),
    }))
  }

  // ---- attempts -----------------------------------------------------------

  /** ASSIGNED and RUNNING attempts (of one worker, or one job), with the resources they hold. */
  activeAttempts(filter: { workerId?: string; jobId?: string } = {}): ActiveAttempt[] {
    const rows = this.stmt(
      `SELECT attempt_id, job_id, task_index, worker_id, state FROM attempts
         WHERE state IN ('ASSIGNED', 'RUNNING') ${filter.workerId !== undefined ? 'AND worker_id = @workerId' : ''}
           ${filter.jobId !== undefined ? 'AND job_id = @jobId' : ''}`,
    ).all(filter) as Row[]
    return rows.map((r) => ({
      attemptId: String(r.attempt_id),
      jobId: String(r.job_id),
      taskIndex: Number(r.task_index),
      workerId: String(r.worker_id),
      state: r.state as AttemptState,
      resources: this.specOf(String(r.job_id)).resources,
    }))
  }

  getAttempt(attemptId: string): AttemptStatus | undefined {
    const r = this.stmt('SELECT * FROM attempts WHERE attempt_id = ?').get(attemptId) as Row | undefined
    return r ? this.toAttempt(r) : undefined
  }

  attemptsOf(jobId: string): AttemptStatus[] {
    return (this.stmt('SELECT * FROM attempts WHERE job_id = ? ORDER BY task_index, attempt').all(jobId) as Row[]).map(
      (r) => this.toAttempt(r),
    )
  }

  private toAttempt(r: Row): AttemptStatus {
    const a: AttemptStatus = {
      attemptId: String(r.attempt_id),
      jobId: String(r.job_id),
      taskIndex: Number(r.task_index),
      attempt: Number(r.attempt),
      workerId: String(r.worker_id),
      state: r.state as AttemptState,
      assignedAt: Number(r.assigned_at),
    }
    const s = opt<number>(r.started_at),
      f = opt<number>(r.finished_at),
      e = opt<number>(r.exit_code),
      err = opt<string>(r.error)
    if (s !== undefined) a.startedAt = s
    if (f !== undefined) a.finishedAt = f
    if (e !== undefined) a.exitCode = e
    if (err !== undefined) a.error = err
    return a
  }

  /** Creates the next attempt of a PENDING task on `workerId`; returns undefined if the task is no longer pending. */
  assign(jobId: string, taskIndex: number, workerId: string, now = Date.now()): AttemptStatus | undefined {
    return this.db.transaction(() => {
      const t = this.stmt('SELECT state, attempts FROM tasks WHERE job_id = ? AND task_index = ?').get(
        jobId,
        taskIndex,
      ) as Row | undefined
      if (t?.state !== 'PENDING') return undefined
      const attempt = Number(t.attempts) + 1
      const attemptId = `${jobId}/${taskIndex}/${attempt}`
      this.stmt(
        `UPDATE tasks SET state = 'ASSIGNED', attempts = ?, worker_id = ? WHERE job_id = ? AND task_index = ?`,
      ).run(attempt, workerId, jobId, taskIndex)
      this.stmt(
        `INSERT INTO attempts (attempt_id, job_id, task_index, attempt, ` +
          `worker_id, state, assigned_at) VALUES (?, ?, ?, ?, ?, ` +
          `'ASSIGNED', ?)`,
      ).run(attemptId, jobId, taskIndex, attempt, workerId, now)
      return this.getAttempt(attemptId)
    })()
  }

  /**
   * Why an ASSIGNED attempt has not started (a Pod waiting: `Pending: ImagePullBackOff: …`), shown as the error
   * of the attempt and its task until it runs; undefined clears it.
   */
  noteWaiting(attemptId: string, note: string | undefined): void {
    this.db.transaction(() => {
      const a = this.stmt('SELECT job_id, task_index, state, error FROM attempts WHERE attempt_id = ?').get(
        attemptId,
      ) as Row | undefined
      if (a?.state !== 'ASSIGNED') return
      this.stmt('UPDATE attempts SET error = ? WHERE attempt_id = ?').run(note ?? null, attemptId)
      this.stmt(
        `UPDATE tasks SET error = ? WHERE job_id = ? AND task_index = ? AND state = 'ASSIGNED' ` +
          `AND (error IS NULL OR error = ?)`,
      ).run(note ?? null, a.job_id, a.task_index, a.error ?? null)
    })()
  }

  /** The worker started the attempt. Ignored unless the attempt is still ASSIGNED. */
  markRunning(attemptId: string, now = Date.now()): boolean {
    return this.db.transaction(() => {
      const a = this.stmt('SELECT job_id, task_index, state, error FROM attempts WHERE attempt_id = ?').get(
        attemptId,
      ) as Row | undefined
      if (a?.state !== 'ASSIGNED') return false
      // An ASSIGNED attempt's error is only why it waited (noteWaiting): it no longer applies.
      if (a.error != null)
        this.stmt(
          `UPDATE tasks SET error = NULL WHERE job_id = ? AND task_index = ? AND state = 'ASSIGNED' AND error = ?`,
        ).run(a.job_id, a.task_index, a.error)
      this.stmt(`UPDATE attempts SET state = 'RUNNING', started_at = ?, error = NULL WHERE attempt_id = ?`).run(
        now,
        attemptId,
      )
      this.stmt(`UPDATE tasks SET state = 'RUNNING' WHERE job_id = ? AND task_index = ? AND state = 'ASSIGNED'`).run(
        a.job_id,
        a.task_index,
      )
      this.stmt(
        `UPDATE jobs SET state = 'RUNNING', started_at = ` +
          `COALESCE(started_at, ?) WHERE job_id = ? AND state = 'PENDING'`,
      ).run(now, a.job_id)
      return true
    })()
  }

  /**
   * Ends an attempt. FAILED and WORKER_FAILED send the task back to PENDING while
   * its budget lasts; otherwise the task takes the attempt's final state and the
   * job's state is recomputed. Idempotent: an attempt that already ended is left alone.
   */
  finishAttempt(
    attemptId: string,
    state: AttemptState,
    outcome: { exitCode?: number; error?: string } = {},
    now = Date.now(),
  ): Transition | undefined {
    if (!isFinalAttemptState(state))
      throw new IrisError('BAD_REQUEST', `attempt ${attemptId}: ${state} is not a final state`)
    return this.db.transaction(() => {
      const a = this.stmt('SELECT * FROM attempts WHERE attempt_id = ?').get(attemptId) as Row | undefined
      if (!a || isFinalAttemptState(String(a.state))) return undefined
      const jobId = String(a.job_id),
        taskIndex = Number(a.task_index)
      const job = this.stmt('SELECT state FROM jobs WHERE job_id = ?').get(jobId) as Row
      // Nobody asked to kill a task of a live job: it was killed on its worker (a worker
      // shutting down), which is a worker loss, retried within that budget.
      if (state === 'KILLED' && !isFinalJobState(String(job.state))) {
        state = 'WORKER_FAILED'
        outcome = { ...outcome, error: outcome.error ?? `killed on worker ${String(a.worker_id)}` }
      }
      this.stmt('UPDATE attempts SET state = ?, finished_at = ?, exit_code = ?, error = ? WHERE attempt_id = ?').run(
        state,
        now,
        outcome.exitCode ?? null,
        outcome.error ?? null,
        attemptId,
      )
      const spec = this.specOf(jobId)
      const t = this.stmt('SELECT * FROM tasks WHERE job_id = ? AND task_index = ?').get(jobId, taskIndex) as Row
      if (isFinalTaskState(String(t.state))) return this.recompute(jobId, now)
      let taskState: string = state
      if (state === 'FAILED') {
        const failures = Number(t.failures) + 1
        this.stmt('UPDATE tasks SET failures = ? WHERE job_id = ? AND task_index = ?').run(failures, jobId, taskIndex)
        if (failures <= spec.maxRetriesFailure && !isFinalJobState(String(job.state))) taskState = 'PENDING'
      } else if (state === 'WORKER_FAILED') {
        const losses = Number(t.worker_losses) + 1
        this.stmt('UPDATE tasks SET worker_losses = ? WHERE job_id = ? AND task_index = ?').run(
          losses,
          jobId,
          taskIndex,
        )
        if (losses <= spec.maxRetriesWorker && !isFinalJobState(String(job.state))) taskState = 'PENDING'
      }
      this.stmt(
        'UPDATE tasks SET state = ?, exit_code = ?, error = ?, worker_id ' +
          "= CASE WHEN ? = 'PENDING' THEN NULL ELSE worker_id END WHERE " +
          'job_id = ? AND task_index = ?',
      ).run(taskState, outcome.exitCode ?? null, outcome.error ?? null, taskState, jobId, taskIndex)
      return this.recompute(jobId, now)
    })()
  }

  /** Marks a PENDING task UNSCHEDULABLE with the reason, which makes its job UNSCHEDULABLE. */
  markUnschedulable(jobId: string, taskIndex: number, reason: string, now = Date.now()): Transition | undefined {
    return this.db.transaction(() => {
      const r = this.stmt(
        `UPDATE tasks SET state = 'UNSCHEDULABLE', error = ? WHERE ` +
          `job_id = ? AND task_index = ? AND state = 'PENDING'`,
      ).run(reason, jobId, taskIndex)
      return r.changes ? this.recompute(jobId, now) : undefined
    })()
  }

  /** Kills a job: pending tasks become KILLED at once; running attempts are returned for the workers to stop. */
  killJob(jobId: string, reason = 'killed by request', now = Date.now()): Transition {
    return this.db.transaction(() => {
      const job = this.getJob(jobId)
      if (!isFinalJobState(job.state)) {
        this.stmt(`UPDATE jobs SET state = 'KILLED', finished_at = ?, error = ? WHERE job_id = ?`).run(
          now,
          reason,
          jobId,
        )
        this.stmt(`UPDATE tasks SET state = 'KILLED', error = ? WHERE job_id = ? AND state = 'PENDING'`).run(
          reason,
          jobId,
        )
      }
      return { jobId, jobState: this.getJob(jobId).state, killAttempts: this.activeAttempts({ jobId }) }
    })()
  }

  // The job's state follows from its tasks: any task failed → FAILED (and the
  // rest are killed), any unschedulable → UNSCHEDULABLE, all succeeded → SUCCEEDED.
  private recompute(jobId: string, now: number): Transition {
    const job = this.stmt('SELECT state FROM jobs WHERE job_id = ?').get(jobId) as Row
    const tasks = this.tasksOf(jobId)
    let state = String(job.state) as JobState
    if (!isFinalJobState(state)) {
      const failed = tasks.find((t) => t.state === 'FAILED' || t.state === 'WORKER_FAILED')
      const unsched = tasks.find((t) => t.state === 'UNSCHEDULABLE')
      let exitCode: number | null = null
      let error: string | null = null
      if (failed) {
        state = 'FAILED'
        exitCode = failed.exitCode ?? null
        error = `task ${failed.taskIndex}: ${failed.error ?? failed.state}`
      } else if (unsched) {
        state = 'UNSCHEDULABLE'
        error = `task ${unsched.taskIndex}: ${unsched.error ?? 'unschedulable'}`
      } else if (tasks.every((t) => t.state === 'SUCCEEDED')) {
        state = 'SUCCEEDED'
        exitCode = 0
      }
      if (isFinalJobState(state)) {
        this.stmt('UPDATE jobs SET state = ?, finished_at = ?, exit_code = ?, error = ? WHERE job_id = ?').run(
          state,
          now,
          exitCode,
          error,
          jobId,
        )
        this.stmt(`UPDATE tasks SET state = 'KILLED', error = ? WHERE job_id = ? AND state = 'PENDING'`).run(
          `job ${state}`,
          jobId,
        )
      }
    }
    const killAttempts = isFinalJobState(state) ? this.activeAttempts({ jobId }) : []
    return { jobId, jobState: state, killAttempts }
  }

  // ---- workers ------------------------------------------------------------

  upsertWorker(w: Omit<WorkerStatus, 'state' | 'registeredAt'>, now = Date.now()): void {
    this.stmt(
      `INSERT INTO workers (worker_id, address, resources, docker, docker_reason, state, registered_at) VALUES (?, ?,
        ?, ?, ?, 'ALIVE', ?)
         ON CONFLICT(worker_id) DO UPDATE SET address = excluded.address, resources = excluded.resources, docker =
           excluded.docker,
           docker_reason = excluded.docker_reason, state = 'ALIVE', lost_at = NULL`,
    ).run(w.workerId, w.address, JSON.stringify(w.resources), w.docker ? 1 : 0, w.dockerReason ?? null, now)
  }

  listWorkers(state?: 'ALIVE' | 'LOST'): WorkerStatus[] {
    const rows = this.stmt(`SELECT * FROM workers ${state ? 'WHERE state = ?' : ''} ORDER BY worker_id`).all(
      ...(state ? [state] : []),
    ) as Row[]
    return rows.map((r) => ({
      workerId: String(r.worker_id),
      address: String(r.address),
      resources: JSON.parse(String(r.resources)) as Resources,
      docker: Number(r.docker) === 1,
      ...(r.docker_reason != null ? { dockerReason: String(r.docker_reason) } : {}),
      state: r.state as 'ALIVE' | 'LOST',
      registeredAt: Number(r.registered_at),
    }))
  }

  /** A worker stopped heartbeating: its attempts become WORKER_FAILED (and their tasks retry within budget). */
  markWorkerLost(workerId: string, reason: string, now = Date.now()): Transition[] {
    return this.db.transaction(() => {
      this.stmt(`UPDATE workers SET state = 'LOST', lost_at = ? WHERE worker_id = ?`).run(now, workerId)
      const out: Transition[] = []
      for (const a of this.activeAttempts({ workerId })) {
        const t = this.finishAttempt(a.attemptId, 'WORKER_FAILED', { error: reason }, now)
        if (t) out.push(t)
      }
      return out
    })()
  }

  // ---- logs ---------------------------------------------------------------

  /**
   * Stores log lines. `lineNo` numbers the lines of one attempt, so a batch sent
   * twice (a retried call) is stored once. Returns how many lines were new.
   */
  appendLogs(lines: readonly (Omit<LogLine, 'seq'> & { lineNo: number })[]): number {
    if (lines.length === 0) return 0
    const ins = this.stmt(
      'INSERT OR IGNORE INTO logs (job_id, task_index, attempt, ' +
        'line_no, stream, ts, line) VALUES (?, ?, ?, ?, ?, ?, ?)',
    )
    return this.db.transaction(() => {
      let n = 0
      for (const l of lines) n += ins.run(l.jobId, l.taskIndex, l.attempt, l.lineNo, l.stream, l.ts, l.line).changes
      return n
    })()
  }

  /** Log lines of a job in order, after `afterSeq` and at or after `sinceTs`. */
  readLogs(
    jobId: string,
    opts: { afterSeq?: number; sinceTs?: number; taskIndex?: number; limit?: number } = {},
  ): LogLine[] {
    const rows = this.stmt(
      `SELECT * FROM logs WHERE job_id = ? AND seq > ? AND ts >= ? ` +
        `${opts.taskIndex !== undefined ? 'AND task_index = ?' : ''} ` +
        `ORDER BY seq LIMIT ?`,
    ).all(
      jobId,
      opts.afterSeq ?? 0,
      opts.sinceTs ?? 0,
      ...(opts.taskIndex !== undefined ? [opts.taskIndex] : []),
      opts.limit ?? 10_000,
    ) as Row[]
    return rows.map((r) => ({
      seq: Number(r.seq),
      jobId: String(r.job_id),
      taskIndex: Number(r.task_index),
      attempt: Number(r.attempt),
      stream: r.stream as LogLine['stream'],
      ts: Number(r.ts),
      line: String(r.line),
    }))
  }
}
