/**
 * @module Runs one task attempt as a child process: its own working directory and
 * process group, injected environment, stdout/stderr captured line by line and to
 * files, exit code reported, and kill as SIGTERM then SIGKILL after a grace period.
 * The task is its whole process tree (`process-tree.ts`): whatever it started, in the
 * background or in a session of its own, is ended when it exits or is killed, and the
 * attempt is over only once none of it is left.
 */
import { spawn } from 'node:child_process'
import { createWriteStream, existsSync, type WriteStream } from 'node:fs'
import { join } from 'node:path'
import { constants } from 'node:os'
import { logger } from '@marin/rigging'
import { ProcessTree, TREE_VARIABLE, withTreeToken } from './process-tree.js'

const log = logger('iris')

export type TaskOutcome = {
  /** WORKER_FAILED: the task ended through no fault of its own (a Kubernetes Pod evicted or lost with its node). */
  state: 'SUCCEEDED' | 'FAILED' | 'KILLED' | 'WORKER_FAILED'
  exitCode?: number
  error?: string
}

export type RunTaskOptions = {
  /** argv of the program; argv[0] is looked up on PATH. */
  command: readonly string[]
  /** The working directory; must exist. */
  cwd: string
  env: Record<string, string>
  /** Where `stdout.log` and `stderr.log` are written. */
  logDir: string
  /** Called for each output line, in order per stream. */
  onLine?: (stream: 'stdout' | 'stderr', line: string, ts: number) => void
  /** Wraps the program so it dies with the worker (see `orphanGuard`). */
  prefix?: readonly string[]
  /** Processes the task leaves running when it exits get SIGTERM, then SIGKILL after this long. @default 10000 */
  graceMs?: number
}

/** After the tree has ended, how long its output pipes may take to reach their end. */
const PIPE_DRAIN_MS = 2000

/** Longest line kept in one piece; longer output is split so memory stays bounded. */
export const MAX_LINE = 64 * 1024

/** A started attempt, in a process of its own or in a warm runner. */
export interface RunningTask {
  readonly done: Promise<TaskOutcome>
  /** Stops the task: SIGTERM to its whole tree, then SIGKILL to what is still there after `graceMs`. */
  kill(graceMs: number): void
}

/** How a process's end reads as a task's outcome. */
export function exitOutcome(
  code: number | null,
  signal: NodeJS.Signals | null,
  spawnError: Error | undefined,
  program: string,
): TaskOutcome {
  if (spawnError) return { state: 'FAILED', exitCode: 127, error: `cannot start "${program}": ${spawnError.message}` }
  if (signal) {
    const no = constants.signals[signal] ?? 0
    return { state: 'FAILED', exitCode: 128 + no, error: `terminated by signal ${signal}` }
  }
  if (code === 0) return { state: 'SUCCEEDED', exitCode: 0 }
  return { state: 'FAILED', exitCode: code ?? 1, error: `exited with code ${code}` }
}

/** A started attempt in a process of its own. */
export class TaskHandle implements RunningTask {
  readonly done: Promise<TaskOutcome>
  private killRequested = false
  private exited = false

  constructor(
    readonly pid: number | undefined,
    done: Promise<TaskOutcome>,
    private readonly tree: ProcessTree,
  ) {
    this.done = done.then((o) => {
      this.exited = true
      return this.killRequested && o.state !== 'SUCCEEDED' ? { ...o, state: 'KILLED' as const } : o
    })
  }

  /** SIGTERM to the task's whole tree, then SIGKILL to what is still there after `graceMs`. */
  kill(graceMs: number): void {
    if (this.exited) return
    this.killRequested = true
    void this.tree.end(graceMs)
  }
}

/** The argv prefix that makes a task die with its worker, when this host has `setpriv`. */
export function orphanGuard(): string[] {
  for (const p of ['/usr/bin/setpriv', '/bin/setpriv']) if (existsSync(p)) return [p, '--pdeathsig', 'KILL', '--']
  return []
}

/** Starts the task. Never throws for a bad command: a failure to start is a FAILED outcome with exit code 127. */
export function runTask(opts: RunTaskOptions): TaskHandle {
  const [program, ...args] = [...(opts.prefix ?? []), ...opts.command]
  const out = createWriteStream(join(opts.logDir, 'stdout.log'))
  const err = createWriteStream(join(opts.logDir, 'stderr.log'))
  const tree = new ProcessTree()
  // Own process group (detached), a cgroup where the host has them, and the tree's marker in the environment.
  const child = tree.start(() =>
    spawn(program!, args, {
      cwd: opts.cwd,
      env: { ...opts.env, [TREE_VARIABLE]: withTreeToken(opts.env[TREE_VARIABLE], tree.token) },
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  )
  const pumps = [pump(child.stdout!, 'stdout', out, opts.onLine), pump(child.stderr!, 'stderr', err, opts.onLine)]
  const done = new Promise<TaskOutcome>((resolve) => {
    let spawnError: Error | undefined
    child.once('error', (e) => {
      spawnError = e
    })
    // 'exit', not 'close': a background child holding the task's stdout would keep 'close' from ever coming.
    child.once('exit', async (code, signal) => {
      tree.rootExited()
      const before = tree.ended
      const left = await tree.end(opts.graceMs ?? 10_000)
      if (!before) log.debug({ pid: child.pid }, 'task exited; the rest of its tree ended')
      if (left.length > 0) log.warn({ pid: child.pid, left }, 'task processes outlived SIGKILL')
      // The tree is gone, so its pipes are at their end; one held open from outside it is not waited for.
      const drained = await Promise.race([
        Promise.all(pumps).then(() => true),
        new Promise<false>((r) => setTimeout(() => r(false), PIPE_DRAIN_MS)),
      ])
      if (!drained) {
        child.stdout!.destroy()
        child.stderr!.destroy()
        await Promise.all(pumps)
      }
      await Promise.all([closeStream(out), closeStream(err)])
      resolve(exitOutcome(code, signal, spawnError, opts.command[0]!))
    })
    // A program that cannot start has no 'exit', only 'error' then 'close'.
    child.once('close', (code, signal) => {
      if (spawnError && child.pid === undefined) {
        void Promise.all([closeStream(out), closeStream(err)]).then(() =>
          resolve(exitOutcome(code, signal, spawnError, opts.command[0]!)),
        )
      }
    })
  })
  return new TaskHandle(child.pid, done, tree)
}

function pump(
  stream: NodeJS.ReadableStream,
  name: 'stdout' | 'stderr',
  file: WriteStream,
  onLine: RunTaskOptions['onLine'],
): Promise<void> {
  return new Promise((resolve) => {
    let rest = ''
    stream.setEncoding('utf8')
    stream.on('data', (chunk: string) => {
      file.write(chunk)
      rest += chunk
      let nl: number
      while ((nl = rest.indexOf('\n')) >= 0) {
        onLine?.(name, rest.slice(0, nl), Date.now())
        rest = rest.slice(nl + 1)
      }
      while (rest.length > MAX_LINE) {
        onLine?.(name, rest.slice(0, MAX_LINE), Date.now())
        rest = rest.slice(MAX_LINE)
      }
    })
    let ended = false
    const end = () => {
      if (ended) return
      ended = true
      if (rest !== '') onLine?.(name, rest, Date.now())
      resolve()
    }
    stream.on('end', end)
    stream.on('error', end)
    // Destroyed (held open from outside the task's tree): what came is kept.
    stream.on('close', end)
  })
}

function closeStream(s: WriteStream): Promise<void> {
  return new Promise((resolve) => s.end(() => resolve()))
}
