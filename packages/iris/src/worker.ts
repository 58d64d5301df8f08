/**
 * @module The worker: registers its resources with the controller, heartbeats
 * (a long poll that also brings new attempts and kill requests), runs each
 * attempt as a child process in its own directory (its whole process tree ended
 * before the attempt is final, see `process-tree.ts`), and reports states and
 * output lines. Reports are retried until the controller takes them, so a
 * controller restart loses nothing the worker saw.
 */
import { execFile } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdirSync, writeFileSync } from 'node:fs'
import { availableParallelism, hostname, totalmem } from 'node:os'
import { join, resolve } from 'node:path'
import { logger, scrubSecretValues, SecretStore } from '@marin/rigging'
import { attemptDir, removeExpiredAttemptDirs } from './attempt-dirs.js'
import { dockerRunArgs, probeDocker, type DockerProbe } from './container.js'
import type { FoundPod } from './kube-pod-spec.js'
import type { KubePods } from './kube-pods.js'
import type { ControllerLink } from './controller-link.js'
import type { Mount } from './mount-spec.js'
import { checkMountPath } from './mount-spec.js'
import type { AttemptReport, LogInput, TaskAssignment } from './protocol.js'
import type { Resources } from './resources.js'
import type { AttemptState } from './states.js'
import { isFinalAttemptState } from './states.js'
import { orphanGuard, runTask, type RunningTask, type TaskOutcome } from './task-runner.js'
import { WarmRunners } from './warm-runner.js'

const log = logger('iris')

/** Puts a read-only copy of an artifact version at `dest` (an absolute directory that does not exist yet). */
export type MountMaterializer = (mount: Mount, dest: string) => Promise<void>

export type WorkerOptions = {
  link: ControllerLink
  /** The controller address tasks see as IRIS_CONTROLLER. */
  controllerAddress: string
  /** Attempt directories are created under `<workDir>/<jobId>/`. */
  workDir: string
  /** @default `<hostname>-<random>` */
  workerId?: string
  /**
   * The address the controller, other hosts and tools reach this worker at, registered with the controller; a
   * function is asked again at each registration (`iris worker` finds the local address of its connection to the
   * controller, see `cli-advertise.ts`). @default '127.0.0.1' (a worker in the controller's own process)
   */
  address?: string | (() => Promise<string>)
  /** What this worker offers. @default all cpus, all memory, gpu=0 */
  resources?: Resources
  /** Time between SIGTERM and SIGKILL when a task is killed. @default 10000 */
  killGraceMs?: number
  /** Finished attempt directories are deleted after this long. @default 86400000 (a day) */
  cleanupTtlMs?: number
  /** Pause after a failed call to the controller. @default 1000 */
  retryDelayMs?: number
  /** Materializes `--mount` artifacts; without it, jobs with mounts fail with a reason. */
  materialize?: MountMaterializer
  /** Docker command to probe and run images with. @default 'docker' */
  dockerBinary?: string
  /** Environment added to every task (e.g. IRIS_TLS_CA, so that tasks reach a TLS controller). */
  extraEnv?: Record<string, string>
  /** Run the tasks of jobs that name a `runner` in warm runners (`warm-runner.ts`); false runs their command as a
   * process. @default true */
  warmRunners?: boolean
  /** An idle warm runner is stopped after this long. @default 60000 */
  warmRunnerIdleMs?: number
  /** Run every attempt as a Kubernetes Pod (`kube-pods.ts`) instead of a process on this host. */
  pods?: KubePods
}

/**
 * Variables of the worker's own environment that a task never inherits: the worker's
 * credential. A task gets its job's own token as IRIS_TOKEN instead (when the controller
 * has auth).
 */
export const WORKER_ONLY_ENV: readonly string[] = ['IRIS_TOKEN', 'IRIS_TOKEN_FILE']

// Secrets are read from their specs only: a store with no chain after them.
const secretStore = new SecretStore({ sources: [] })

type Held = {
  assignment: Pick<TaskAssignment, 'attemptId' | 'jobId' | 'taskIndex' | 'attempt'>
  state: AttemptState
  exitCode?: number
  error?: string
  at: number
  handle?: RunningTask
  killRequested: boolean
  /** GPU indices given to the attempt (CUDA_VISIBLE_DEVICES). */
  gpus?: number[]
  /** Name of the docker container running the attempt, if it has an image. */
  container?: string
  /** Killed because this worker is stopping: the controller retries it elsewhere. */
  shutdown?: boolean
  lineNo: number
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
/** The host of a registered `HOST[:PORT]` (`[v6]:port` too; a bare IPv6 address is all host). */
const hostOf = (address: string) =>
  /^\[([^\]]+)\](?::\d+)?$/.exec(address)?.[1] ?? /^([^:]+):\d+$/.exec(address)?.[1] ?? address
const MAX_BUFFERED_LINES = 200_000

export class Worker {
  readonly workerId: string
  readonly resources: Resources
  readonly workDir: string
  /** The address this worker last registered by (undefined before it first registers). */
  address: string | undefined
  private readonly held = new Map<string, Held>()
  private readonly seen = new Set<string>()
  private readonly dirty = new Set<string>()
  private logs: LogInput[] = []
  private flushing = false
  private silenced = false
  private flushAgain = false
  private running = false
  private loop: Promise<void> | undefined
  private docker: DockerProbe = { available: false, reason: 'not probed yet' }
  private waitMs = 1000
  private cleanupTimer: NodeJS.Timeout | undefined
  private readonly guard = orphanGuard()
  /** GPU indices not given to a running attempt. */
  private readonly freeGpus: number[]
  private readonly abort = new AbortController()
  private readonly warm: WarmRunners | undefined

  constructor(private readonly opts: WorkerOptions) {
    this.workerId = opts.workerId ?? `${hostname()}-${randomBytes(3).toString('hex')}`
    this.resources = opts.resources ?? { cpu: availableParallelism(), memory: totalmem(), gpu: 0 }
    this.workDir = resolve(opts.workDir)
    this.freeGpus = Array.from({ length: this.resources.gpu }, (_, i) => i)
    if (opts.warmRunners ?? true)
      this.warm = new WarmRunners({
        prefix: this.guard,
        cwd: this.workDir,
        graceMs: opts.killGraceMs ?? 10_000,
        ...(opts.warmRunnerIdleMs !== undefined ? { idleMs: opts.warmRunnerIdleMs } : {}),
      })
  }

  /** Probes docker, registers (retrying until the controller answers) and starts heartbeating. */
  async start(): Promise<void> {
    mkdirSync(this.workDir, { recursive: true })
    if (this.opts.pods) {
      // Every Pod has an image: the job's, else the platform's default.
      const found = await this.opts.pods.start()
      // Pods left by an earlier run of this worker (a controller restarted): followed again, reported at
      // registration; the controller kills those it no longer wants.
      for (const f of found) this.adoptPod(f, this.opts.pods)
      this.docker = { available: true }
    } else this.docker = await probeDocker(this.opts.dockerBinary ? { binary: this.opts.dockerBinary } : {})
    if (!this.docker.available)
      log.info({ reason: this.docker.reason }, 'docker unavailable: jobs with an image will be refused')
    this.running = true
    await this.register()
    this.loop = this.heartbeatLoop()
    const ttl = this.opts.cleanupTtlMs ?? 86_400_000
    this.cleanup(ttl)
    this.cleanupTimer = setInterval(() => this.cleanup(ttl), Math.max(100, Math.min(ttl / 2, 60_000)))
    this.cleanupTimer.unref()
  }

  /** Whether this worker runs its attempts as Kubernetes Pods. */
  get runsPods(): boolean {
    return this.opts.pods !== undefined
  }

  /** Stops heartbeating; with `killTasks`, kills running attempts and waits for them. */
  async stop(opts: { killTasks?: boolean } = {}): Promise<void> {
    this.running = false
    this.abort.abort()
    clearInterval(this.cleanupTimer)
    // Left running, tasks are no longer reported: to the controller this worker is gone.
    if (!(opts.killTasks ?? true)) this.silenced = true
    if (opts.killTasks ?? true) {
      const done: Promise<unknown>[] = []
      for (const h of this.held.values()) {
        if (h.handle && !isFinalAttemptState(h.state)) {
          h.killRequested = true
          h.shutdown = true
          h.handle.kill(this.opts.killGraceMs ?? 10_000)
          done.push(h.handle.done)
        }
      }
      await Promise.all(done)
      await this.warm?.close(this.opts.killGraceMs ?? 10_000)
      await this.opts.pods?.close()
      await this.flush().catch(() => {})
      // Say goodbye so that nothing more is assigned here while the controller waits for a heartbeat.
      await this.opts.link
        .report({ workerId: this.workerId, attempts: this.attempts(), logs: [], leaving: true })
        .catch(() => {})
    }
    await this.loop?.catch(() => {})
    if (!(opts.killTasks ?? true)) await this.opts.pods?.close()
  }

  /** Attempts this worker holds now, with their states. */
  attempts(): AttemptReport[] {
    return [...this.held.values()].map((h) => ({
      attemptId: h.assignment.attemptId,
      state: h.state,
      at: h.at,
      ...(h.exitCode !== undefined ? { exitCode: h.exitCode } : {}),
      ...(h.error !== undefined ? { error: h.error } : {}),
    }))
  }

  private async register(): Promise<void> {
    while (this.running) {
      try {
        const a = this.opts.address ?? '127.0.0.1'
        const address = typeof a === 'string' ? a : await a()
        const res = await this.opts.link.register({
          workerId: this.workerId,
          address,
          resources: this.resources,
          docker: this.docker.available,
          ...(this.docker.reason ? { dockerReason: this.docker.reason } : {}),
          attempts: this.attempts(),
        })
        this.waitMs = res.heartbeatMs
        this.address = address
        log.info({ workerId: this.workerId, address, resources: this.resources }, 'registered with controller')
        return
      } catch (err) {
        log.warn({ err, workerId: this.workerId }, 'register failed; retrying')
        await sleep(this.opts.retryDelayMs ?? 1000)
      }
    }
  }

  private async heartbeatLoop(): Promise<void> {
    while (this.running) {
      let res
      try {
        res = await this.opts.link.heartbeat(
          { workerId: this.workerId, attempts: this.attempts(), waitMs: this.waitMs },
          this.abort.signal,
        )
      } catch (err) {
        if (!this.running) return
        log.warn({ err, workerId: this.workerId }, 'heartbeat failed; retrying')
        await sleep(this.opts.retryDelayMs ?? 1000)
        continue
      }
      if (!this.running) return
      // A macrotask between calls: an in-process link answers in microtasks only.
      await new Promise((r) => setImmediate(r))
      for (const id of res.kill) this.killAttempt(id)
      if (res.reregister) {
        // The controller gave up on this worker and retried its tasks elsewhere.
        for (const h of this.held.values()) this.killAttempt(h.assignment.attemptId)
        await this.register()
        continue
      }
      for (const a of res.assign) this.startAttempt(a)
    }
  }

  private killAttempt(attemptId: string): void {
    const h = this.held.get(attemptId)
    if (!h || isFinalAttemptState(h.state)) return
    h.killRequested = true
    if (h.handle) h.handle.kill(this.opts.killGraceMs ?? 10_000)
    // A container may outlive its `docker run` client: stop it by name after the grace period too.
    if (h.container) {
      const name = h.container
      setTimeout(
        () => execFile(this.opts.dockerBinary ?? 'docker', ['kill', name], () => {}),
        this.opts.killGraceMs ?? 10_000,
      ).unref()
    }
  }

  private startAttempt(a: TaskAssignment): void {
    if (this.held.has(a.attemptId) || this.seen.has(a.attemptId)) return
    this.seen.add(a.attemptId)
    // Remember recent attempt ids only: the controller never resends an attempt it has seen finish.
    if (this.seen.size > 100_000) this.seen.delete(this.seen.values().next().value!)
    const h: Held = { assignment: a, state: 'ASSIGNED', at: Date.now(), killRequested: false, lineNo: 0 }
    this.held.set(a.attemptId, h)
    this.launch(h, a).catch((err: unknown) =>
      this.finish(h, { state: 'FAILED', error: `worker could not start the task: ${(err as Error).message}` }),
    )
  }

  private async launch(h: Held, a: TaskAssignment): Promise<void> {
    if (this.opts.pods) return this.launchPod(h, a, this.opts.pods)
    const dir = attemptDir(this.workDir, a.jobId, a.taskIndex, a.attempt)
    const work = join(dir, 'work')
    mkdirSync(work, { recursive: true })
    const inherited = { ...(process.env as Record<string, string>) }
    for (const k of WORKER_ONLY_ENV) delete inherited[k]
    // Resolved here, on the worker: the values never travel to or through the controller.
    const secrets: Record<string, string> = {}
    for (const [name, spec] of Object.entries(a.spec.secrets ?? {})) secrets[name] = secretStore.resolve(spec, name)
    const env: Record<string, string> = {
      ...inherited,
      ...(this.opts.extraEnv ?? {}),
      ...a.spec.env,
      ...secrets,
      ...(a.token !== undefined ? { IRIS_TOKEN: a.token } : {}),
      IRIS_JOB_ID: a.jobId,
      IRIS_TASK_INDEX: String(a.taskIndex),
      IRIS_NUM_TASKS: String(a.numTasks),
      IRIS_ATTEMPT: String(a.attempt),
      IRIS_CONTROLLER: this.opts.controllerAddress,
      IRIS_WORKER_ID: this.workerId,
      ...(this.address !== undefined ? { IRIS_WORKER_HOST: hostOf(this.address) } : {}),
      IRIS_TASK_DIR: work,
    }
    // Each attempt gets its own devices; the scheduler never sends more than there are free.
    if (a.spec.resources.gpu > 0) {
      h.gpus = this.freeGpus.splice(0, a.spec.resources.gpu)
      env.CUDA_VISIBLE_DEVICES = h.gpus.join(',')
      env.IRIS_GPUS = h.gpus.join(',')
    }
    if (a.spec.image !== undefined && !this.docker.available) {
      return this.finish(h, {
        state: 'FAILED',
        error:
          `refused: job has image ${a.spec.image} but this worker cannot ` +
          `run images (${this.docker.reason}); it never runs an image job ` +
          `without its image`,
      })
    }
    if (a.spec.mounts.length > 0) {
      if (!this.opts.materialize) {
        return this.finish(h, {
          state: 'FAILED',
          error: 'the job has --mount but this worker has no artifact store; start it with --store URL',
        })
      }
      for (const m of a.spec.mounts) {
        const dest = join(work, checkMountPath(m.path))
        await this.opts.materialize(m, dest)
        env[`IRIS_MOUNT_${m.path.replace(/[^A-Za-z0-9]/g, '_').toUpperCase()}`] = dest
      }
      env.IRIS_MOUNTS = JSON.stringify(Object.fromEntries(a.spec.mounts.map((m) => [m.path, join(work, m.path)])))
    }
    if (h.killRequested) return this.finish(h, { state: 'KILLED', error: 'killed before it started' })
    let command = a.spec.command
    if (a.spec.image !== undefined) {
      const inner = Object.fromEntries(
        Object.entries(env).filter(([k]) => k.startsWith('IRIS_') || k in a.spec.env || k in secrets),
      )
      inner.IRIS_TASK_DIR = '/workspace'
      h.container = `iris-${a.attemptId.replace(/[^A-Za-z0-9_.-]/g, '-')}`
      command = dockerRunArgs({
        ...(this.opts.dockerBinary ? { binary: this.opts.dockerBinary } : {}),
        image: a.spec.image,
        name: h.container,
        workDir: work,
        env: inner,
        command,
        ...(h.gpus ? { gpus: h.gpus } : {}),
        byName: new Set([...Object.keys(secrets), 'IRIS_TOKEN']),
      })
    }
    const warm = a.spec.runner && a.spec.image === undefined ? this.warm : undefined
    writeFileSync(
      join(dir, 'attempt.json'),
      JSON.stringify({
        attemptId: a.attemptId,
        command,
        ...(warm ? { runner: a.spec.runner!.command } : {}),
        startedAt: Date.now(),
      }),
    )
    // Resolved secret values never leave the worker, not even in the task's own output.
    const onLine = (stream: 'stdout' | 'stderr', line: string, ts: number) =>
      this.pushLine({ attemptId: a.attemptId, lineNo: h.lineNo++, stream, ts, line: scrubSecretValues(line) })
    h.handle = warm
      ? warm.run({
          runner: a.spec.runner!.command,
          command,
          env,
          submitter: a.spec.parent ?? '',
          cwd: work,
          logDir: dir,
          onLine,
        })
      : runTask({
          command,
          cwd: work,
          env,
          logDir: dir,
          prefix: this.guard,
          onLine,
          graceMs: this.opts.killGraceMs ?? 10_000,
        })
    h.state = 'RUNNING'
    h.at = Date.now()
    this.markDirty(a.attemptId)
    const outcome = await h.handle.done
    this.finish(h, outcome)
  }

  /** An attempt as a Kubernetes Pod: the variables a process would get, less this host's own environment. */
  private async launchPod(h: Held, a: TaskAssignment, pods: KubePods): Promise<void> {
    if (a.spec.mounts.length > 0 && !pods.mountsSupported)
      return this.finish(h, {
        state: 'FAILED',
        error:
          'refused: the job has --mount but this k8s platform has no --mount-store (the finestore store as Pods ' +
          'see it, e.g. file:///data/.marin/store on a --volume every Pod mounts); start it with one, or run the ' +
          'job on iris workers',
      })
    for (const m of a.spec.mounts) checkMountPath(m.path)
    const secretEnv: Record<string, string> = {}
    for (const [name, spec] of Object.entries(a.spec.secrets ?? {})) secretEnv[name] = secretStore.resolve(spec, name)
    if (a.token !== undefined) secretEnv.IRIS_TOKEN = a.token
    const env: Record<string, string> = {
      ...(this.opts.extraEnv ?? {}),
      ...a.spec.env,
      IRIS_JOB_ID: a.jobId,
      IRIS_TASK_INDEX: String(a.taskIndex),
      IRIS_NUM_TASKS: String(a.numTasks),
      IRIS_ATTEMPT: String(a.attempt),
      IRIS_CONTROLLER: this.opts.controllerAddress,
      IRIS_WORKER_ID: this.workerId,
      IRIS_TASK_DIR: '/workspace',
    }
    if (h.killRequested) return this.finish(h, { state: 'KILLED', error: 'killed before it started' })
    h.handle = pods.run({ assignment: a, env, secretEnv, ...this.podCallbacks(h) }, this.opts.killGraceMs ?? 10_000)
    await this.followPod(h)
  }

  /** A Pod an earlier run of this worker made (found at start): held and reported again, followed to its end. */
  private adoptPod(f: FoundPod, pods: KubePods): void {
    const h: Held = {
      assignment: { attemptId: f.attemptId, jobId: f.jobId, taskIndex: f.taskIndex, attempt: f.attempt },
      state: 'ASSIGNED',
      at: Date.now(),
      killRequested: false,
      lineNo: 0,
    }
    this.held.set(f.attemptId, h)
    this.seen.add(f.attemptId)
    // Resolved again so that their values stay out of the output, as for the Pods this run makes.
    for (const [name, spec] of Object.entries(f.secrets)) {
      try {
        secretStore.resolve(spec, name)
      } catch (err) {
        log.warn({ attemptId: f.attemptId, secret: name, err }, "an adopted pod's secret no longer resolves")
      }
    }
    h.handle = pods.adopt(f, this.podCallbacks(h))
    void this.followPod(h)
  }

  // ASSIGNED while the Pod is Pending (with why it waits as the report's error), RUNNING once it runs; output
  // lines keep the numbers the platform gives them (their place in the Pod's log).
  private podCallbacks(h: Held) {
    const id = h.assignment.attemptId
    return {
      onLine: (stream: 'stdout' | 'stderr', line: string, ts: number, lineNo: number) =>
        this.pushLine({ attemptId: id, lineNo, stream, ts, line: scrubSecretValues(line) }),
      onPending: (note: string | undefined) => {
        if (h.state !== 'ASSIGNED') return
        h.error = note ? `Pending: ${note}` : undefined
        this.markDirty(id)
      },
      onRunning: () => {
        if (h.state !== 'ASSIGNED') return
        h.state = 'RUNNING'
        h.error = undefined
        h.at = Date.now()
        this.markDirty(id)
      },
    }
  }

  private async followPod(h: Held): Promise<void> {
    const outcome = await h.handle!.done
    if (h.state === 'ASSIGNED') h.error = undefined
    this.finish(h, outcome)
  }

  private finish(h: Held, o: Partial<TaskOutcome> & { state: AttemptState }): void {
    if (isFinalAttemptState(h.state)) return
    if (h.gpus) {
      this.freeGpus.push(...h.gpus)
      this.freeGpus.sort((x, y) => x - y)
      h.gpus = undefined
    }
    h.state = h.killRequested && o.state !== 'SUCCEEDED' ? (h.shutdown ? 'WORKER_FAILED' : 'KILLED') : o.state
    if (o.exitCode !== undefined) h.exitCode = o.exitCode
    if (o.error !== undefined) h.error = o.error
    if (h.shutdown && h.state === 'WORKER_FAILED') h.error = `worker ${this.workerId} shut down while the task ran`
    h.at = Date.now()
    const a = h.assignment
    const dir = attemptDir(this.workDir, a.jobId, a.taskIndex, a.attempt)
    try {
      writeFileSync(join(dir, '.iris-finished'), JSON.stringify({ state: h.state, exitCode: h.exitCode, at: h.at }))
    } catch {
      // The directory may not exist when the attempt failed before creating it.
    }
    if (h.state !== 'SUCCEEDED')
      log.info({ attemptId: a.attemptId, state: h.state, exitCode: h.exitCode, error: h.error }, 'attempt ended')
    this.markDirty(a.attemptId)
  }

  private pushLine(l: LogInput): void {
    if (this.logs.length >= MAX_BUFFERED_LINES) {
      // The controller is unreachable for long: keep the newest lines.
      this.logs.shift()
    }
    this.logs.push(l)
    this.scheduleFlush()
  }

  private markDirty(attemptId: string): void {
    this.dirty.add(attemptId)
    this.scheduleFlush()
  }

  private flushQueued = false
  private scheduleFlush(): void {
    if (this.flushQueued) return
    this.flushQueued = true
    // One tick of coalescing batches a burst of lines into one call.
    setImmediate(() => {
      this.flushQueued = false
      this.flush().catch(() => {})
    })
  }

  /** Sends pending states and lines; retries until the controller takes them. */
  private async flush(): Promise<void> {
    if (this.flushing) {
      this.flushAgain = true
      return
    }
    this.flushing = true
    try {
      while ((this.dirty.size > 0 || this.logs.length > 0) && !this.silenced) {
        const ids = [...this.dirty]
        this.dirty.clear()
        const reports = ids.map((id) => this.held.get(id)).filter((h): h is Held => h !== undefined)
        const states = reports.map((h) => ({ id: h.assignment.attemptId, state: h.state }))
        const logs = this.logs.splice(0, 5000)
        try {
          const attempts = this.attempts().filter((r) => ids.includes(r.attemptId))
          const res = await this.opts.link.report({ workerId: this.workerId, attempts, logs })
          // Finished attempts the controller has taken are forgotten (their ids stay in `seen`).
          for (const s of states) {
            const h = this.held.get(s.id)
            if (h && h.state === s.state && isFinalAttemptState(s.state) && !res.reregister) this.held.delete(s.id)
          }
        } catch (err) {
          this.logs = logs.concat(this.logs)
          for (const id of ids) this.dirty.add(id)
          if (!this.running && this.abort.signal.aborted) return
          log.warn({ err }, 'report to controller failed; retrying')
          await sleep(this.opts.retryDelayMs ?? 1000)
        }
      }
    } finally {
      this.flushing = false
      if (this.flushAgain) {
        this.flushAgain = false
        this.scheduleFlush()
      }
    }
  }

  /** Deletes this worker's attempt directories that finished more than `ttlMs` ago; returns how many. */
  cleanup(ttlMs: number): number {
    return removeExpiredAttemptDirs(this.workDir, (attemptId) => this.held.has(attemptId), ttlMs)
  }
}
