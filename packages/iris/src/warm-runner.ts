/**
 * @module Warm runners, the worker's side: a job that names a `runner` (a program built on
 * `serveWarmTasks`, see `warm-task.ts`) has its tasks run as calls into a process the worker keeps
 * between tasks, instead of a process per task. A runner serves one task at a time; its output
 * between the start of a task and the task's end marker is that task's (files and lines, as for a
 * task process); killing the task kills the runner's whole process tree (`process-tree.ts`). What a
 * task starts (a detached child, a daemon) carries the task's own `IRIS_TASK_TREE` token, and is
 * ended when the task ends, before the next task is given the runner.
 *
 * Runners are shared only by tasks that would see the same process: the same runner command, the
 * same environment apart from the task's own variables (so the same job settings and resolved
 * secrets, the same devices) and the same submitter (the cluster token, or one parent job). A
 * runner whose task failed, exited or was killed is never reused, and an idle runner is stopped
 * after `idleMs`.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { createHash, randomBytes } from 'node:crypto'
import { createWriteStream, type WriteStream } from 'node:fs'
import { join } from 'node:path'
import { logger } from '@marin/rigging'
import { ProcessTree, TREE_VARIABLE, withTreeToken } from './process-tree.js'
import { exitOutcome, MAX_LINE, type RunningTask, type TaskOutcome } from './task-runner.js'
import { WARM_TASK_END, type WarmDoneMessage, type WarmRunMessage } from './warm-task.js'

const log = logger('iris')

/** Variables that differ from task to task: set for the call only, never part of the runner's own environment. */
export function isTaskVariable(name: string): boolean {
  return (
    [
      'IRIS_TOKEN',
      'IRIS_JOB_ID',
      'IRIS_TASK_INDEX',
      'IRIS_NUM_TASKS',
      'IRIS_ATTEMPT',
      'IRIS_TASK_DIR',
      TREE_VARIABLE,
    ].includes(name) || name.startsWith('IRIS_MOUNT')
  )
}

export type WarmRunOptions = {
  /** The runner program's argv. */
  runner: readonly string[]
  /** The job's command, passed to the runner as the task's argv. */
  command: readonly string[]
  /** The task's whole environment, as a task process would get it. */
  env: Record<string, string>
  /** Who submitted the job: '' for the cluster token, else the parent job. */
  submitter: string
  cwd: string
  logDir: string
  onLine?: (stream: 'stdout' | 'stderr', line: string, ts: number) => void
}

type Sink = {
  readonly id: string
  readonly files: Record<'stdout' | 'stderr', WriteStream>
  readonly onLine: WarmRunOptions['onLine']
  readonly ended: Record<'stdout' | 'stderr', boolean>
  code?: number
  settle: (o: TaskOutcome) => void
}

/** One runner process. */
class Runner {
  readonly child: ChildProcess
  private current: Sink | undefined
  private readonly rest = { stdout: '', stderr: '' }
  exited = false
  private spawnError: Error | undefined
  idleTimer: NodeJS.Timeout | undefined
  killRequested = false
  /** The runner and everything it started, in a cgroup where the host has them. */
  private readonly tree = new ProcessTree()
  /** `IRIS_TASK_TREE` of the runner: its tasks' own tokens are added to it. */
  readonly treeValue: string

  constructor(
    readonly key: string,
    argv: readonly string[],
    env: Record<string, string>,
    cwd: string,
    outerTree: string | undefined,
    private readonly graceMs: number,
    private readonly onExit: (r: Runner) => void,
  ) {
    const [program, ...args] = argv
    this.treeValue = withTreeToken(outerTree, this.tree.token)
    this.child = this.tree.start(() =>
      spawn(program!, args, {
        cwd,
        env: { ...env, [TREE_VARIABLE]: this.treeValue },
        detached: true,
        stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
        serialization: 'json',
      }),
    )
    for (const s of ['stdout', 'stderr'] as const) {
      const stream = this.child[s]!
      stream.setEncoding('utf8')
      stream.on('data', (chunk: string) => this.data(s, chunk))
    }
    this.child.on('message', (m: WarmDoneMessage) => {
      const t = this.current
      if (m?.type !== 'done' || !t || m.id !== t.id) return
      t.code = m.code
      this.maybeEnd()
    })
    this.child.once('error', (e) => {
      this.spawnError = e
    })
    // What the runner left running ends with it; until then a child holding its stdout would keep 'close' away.
    this.child.once('exit', () => {
      this.exited = true
      this.tree.rootExited()
      void this.tree.end(this.graceMs)
    })
    this.child.once('close', async (code, signal) => {
      this.exited = true
      if (this.child.pid !== undefined) await this.tree.end(this.graceMs)
      this.onExit(this)
      const t = this.current
      if (!t) return
      for (const s of ['stdout', 'stderr'] as const) if (this.rest[s] !== '') this.line(s, this.rest[s])
      this.current = undefined
      const o = exitOutcome(code, signal, this.spawnError, argv[0]!)
      // A runner that exits with 0 during a task ended it early: never a success it did not report.
      const outcome: TaskOutcome =
        o.state === 'SUCCEEDED'
          ? { state: 'FAILED', exitCode: 0, error: 'the warm runner exited during the task without reporting its end' }
          : o
      void this.close(
        t,
        this.killRequested && outcome.state !== 'SUCCEEDED' ? { ...outcome, state: 'KILLED' } : outcome,
      )
    })
  }

  get alive(): boolean {
    return !this.exited && this.child.connected
  }

  get busy(): boolean {
    return this.current !== undefined
  }

  run(o: WarmRunOptions, taskEnv: Record<string, string>): Promise<TaskOutcome> {
    const id = randomBytes(6).toString('hex')
    return new Promise<TaskOutcome>((settle) => {
      this.current = {
        id,
        files: {
          stdout: createWriteStream(join(o.logDir, 'stdout.log')),
          stderr: createWriteStream(join(o.logDir, 'stderr.log')),
        },
        onLine: o.onLine,
        ended: { stdout: false, stderr: false },
        settle,
      }
      const msg: WarmRunMessage = { type: 'run', id, argv: [...o.command], env: taskEnv, cwd: o.cwd }
      this.child.send(msg, (err) => {
        if (err) log.debug({ err }, 'warm runner did not take the task; it is exiting')
      })
    })
  }

  /** SIGTERM to the runner's whole tree, then SIGKILL after `graceMs`; resolves once none of it is left. */
  async kill(graceMs: number): Promise<void> {
    if (this.child.pid === undefined) return
    if (!this.exited) this.killRequested = true
    await this.tree.end(graceMs)
  }

  private data(s: 'stdout' | 'stderr', chunk: string): void {
    this.rest[s] += chunk
    let nl: number
    while ((nl = this.rest[s].indexOf('\n')) >= 0) {
      const l = this.rest[s].slice(0, nl)
      this.rest[s] = this.rest[s].slice(nl + 1)
      this.line(s, l)
    }
    while (this.rest[s].length > MAX_LINE && !this.rest[s].slice(0, MAX_LINE).includes(WARM_TASK_END[0]!)) {
      this.line(s, this.rest[s].slice(0, MAX_LINE))
      this.rest[s] = this.rest[s].slice(MAX_LINE)
    }
  }

  private line(s: 'stdout' | 'stderr', l: string): void {
    const t = this.current
    if (!t || t.ended[s]) {
      // Output between tasks (a timer a task left behind): nobody's, so nobody's log.
      if (l !== '') log.debug({ runner: this.child.pid, stream: s }, 'warm runner output outside a task dropped')
      return
    }
    const marker = `${WARM_TASK_END}${t.id}`
    const at = l.endsWith(marker) ? l.length - marker.length : -1
    const text = at >= 0 ? l.slice(0, at) : l
    if (at < 0 || text !== '') {
      t.files[s].write(`${text}\n`)
      t.onLine?.(s, text, Date.now())
    }
    if (at >= 0) {
      t.ended[s] = true
      this.maybeEnd()
    }
  }

  private maybeEnd(): void {
    const t = this.current
    if (!t || t.code === undefined || !t.ended.stdout || !t.ended.stderr) return
    this.current = undefined
    const outcome: TaskOutcome =
      t.code === 0
        ? { state: 'SUCCEEDED', exitCode: 0 }
        : { state: 'FAILED', exitCode: t.code, error: `exited with code ${t.code}` }
    void this.close(t, outcome)
  }

  private async close(t: Sink, o: TaskOutcome): Promise<void> {
    await Promise.all(Object.values(t.files).map((f) => new Promise<void>((r) => f.end(() => r()))))
    t.settle(o)
  }
}

/** A task running in a warm runner. */
class WarmTaskHandle implements RunningTask {
  constructor(
    private readonly runner: Runner,
    readonly done: Promise<TaskOutcome>,
  ) {}
  get pid(): number | undefined {
    return this.runner.child.pid
  }
  kill(graceMs: number): void {
    void this.runner.kill(graceMs)
  }
}

export type WarmRunnersOptions = {
  /** Wraps the runner program so it dies with the worker (`orphanGuard`). */
  prefix?: readonly string[]
  /** The folder runners start in. */
  cwd: string
  /** An idle runner is stopped after this long. @default 60000 */
  idleMs?: number
  /**
   * What a task leaves running when it ends, and a runner that is not reused, get SIGTERM, then SIGKILL after
   * this long. @default 1000
   */
  graceMs?: number
}

/** The warm runners of one worker. */
export class WarmRunners {
  private readonly idle = new Map<string, Runner[]>()
  private readonly all = new Set<Runner>()

  constructor(private readonly opts: WarmRunnersOptions) {}

  /** Runs a task in an idle runner of its kind, or in a new one. */
  run(o: WarmRunOptions): RunningTask & { readonly pid: number | undefined } {
    const base: Record<string, string> = {}
    const taskEnv: Record<string, string> = {}
    for (const [k, v] of Object.entries(o.env)) (isTaskVariable(k) ? taskEnv : base)[k] = v
    const outer = taskEnv[TREE_VARIABLE]
    const key = runnerKey(o.runner, base, o.submitter)
    const graceMs = this.opts.graceMs ?? 1000
    let runner = this.take(key)
    if (!runner) {
      const argv = [...(this.opts.prefix ?? []), ...o.runner]
      runner = new Runner(key, argv, base, this.opts.cwd, outer, graceMs, (r) => this.forget(r))
      this.all.add(runner)
    }
    const r = runner
    // The task's own token: what it starts carries it, the runner (started before) does not.
    const pid = r.child.pid
    const tree = new ProcessTree({
      cgroup: false,
      group: false,
      ...(pid !== undefined ? { exclude: [pid], startedAfter: pid } : {}),
    })
    taskEnv[TREE_VARIABLE] = withTreeToken(r.treeValue, tree.token)
    const done = r.run(o, taskEnv).then(async (outcome) => {
      await tree.end(graceMs)
      // Only a runner whose task succeeded serves again: a failure may have left it in any state.
      if (outcome.state === 'SUCCEEDED' && r.alive && !r.killRequested) this.park(r)
      else await r.kill(graceMs)
      return outcome
    })
    return new WarmTaskHandle(r, done)
  }

  /** Runners started and not yet exited. */
  get size(): number {
    return this.all.size
  }

  /** Stops every runner (running tasks die with theirs) and waits until they are gone. */
  async close(graceMs = 5000): Promise<void> {
    const gone = [...this.all].map(
      (r) => new Promise<void>((res) => (r.exited ? res() : r.child.once('close', () => res()))),
    )
    for (const r of this.all) {
      if (r.idleTimer) clearTimeout(r.idleTimer)
      void r.kill(graceMs)
    }
    this.idle.clear()
    await Promise.race([Promise.all(gone), new Promise((res) => setTimeout(res, graceMs + 1000).unref())])
  }

  private take(key: string): Runner | undefined {
    const list = this.idle.get(key)
    while (list && list.length > 0) {
      const r = list.pop()!
      if (r.idleTimer) clearTimeout(r.idleTimer)
      if (r.alive && !r.busy) return r
    }
    return undefined
  }

  private park(r: Runner): void {
    const list = this.idle.get(r.key) ?? []
    list.push(r)
    this.idle.set(r.key, list)
    r.idleTimer = setTimeout(() => void r.kill(this.opts.graceMs ?? 1000), this.opts.idleMs ?? 60_000)
    r.idleTimer.unref()
  }

  private forget(r: Runner): void {
    this.all.delete(r)
    if (r.idleTimer) clearTimeout(r.idleTimer)
    const list = this.idle.get(r.key)
    if (list)
      this.idle.set(
        r.key,
        list.filter((x) => x !== r),
      )
  }
}

/** Which tasks may share a runner; a hash, so that no secret value is kept as a key. */
function runnerKey(runner: readonly string[], env: Record<string, string>, submitter: string): string {
  const sorted = Object.keys(env)
    .sort()
    .map((k) => [k, env[k]])
  return createHash('sha256')
    .update(JSON.stringify([runner, sorted, submitter]))
    .digest('hex')
}
