/**
 * @module Runs one task attempt as a child process: its own working directory and
 * process group, injected environment, stdout/stderr captured line by line and to
 * files, exit code reported, and kill as SIGTERM then SIGKILL after a grace period.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { createWriteStream, existsSync, type WriteStream } from 'node:fs'
import { join } from 'node:path'
import { constants } from 'node:os'

/** `sig` to a child's whole process group (it was spawned detached), else to the child alone; nothing if it is gone. */
export function signalGroup(child: ChildProcess, sig: NodeJS.Signals): void {
  const pid = child.pid
  if (pid === undefined) return
  try {
    process.kill(-pid, sig)
  } catch {
    try {
      child.kill(sig)
    } catch {
      // Already gone.
    }
  }
}

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
}

/** Longest line kept in one piece; longer output is split so memory stays bounded. */
export const MAX_LINE = 64 * 1024

/** A started attempt, in a process of its own or in a warm runner. */
export interface RunningTask {
  readonly done: Promise<TaskOutcome>
  /** Stops the task: SIGTERM to its process group, then SIGKILL if it is still there after `graceMs`. */
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
  private killTimer: NodeJS.Timeout | undefined
  private exited = false

  constructor(
    private readonly child: ChildProcess,
    done: Promise<TaskOutcome>,
  ) {
    this.done = done.then((o) => {
      this.exited = true
      if (this.killTimer) clearTimeout(this.killTimer)
      return this.killRequested && o.state !== 'SUCCEEDED' ? { ...o, state: 'KILLED' as const } : o
    })
  }

  get pid(): number | undefined {
    return this.child.pid
  }

  /** SIGTERM to the task's process group, then SIGKILL if it is still there after `graceMs`. */
  kill(graceMs: number): void {
    if (this.exited) return
    this.killRequested = true
    this.signal('SIGTERM')
    this.killTimer ??= setTimeout(() => this.signal('SIGKILL'), graceMs)
  }

  private signal(sig: NodeJS.Signals): void {
    signalGroup(this.child, sig)
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
  // Own process group (detached) so kill reaches the whole tree the task starts.
  const child = spawn(program!, args, {
    cwd: opts.cwd,
    env: opts.env,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const pumps = [pump(child.stdout!, 'stdout', out, opts.onLine), pump(child.stderr!, 'stderr', err, opts.onLine)]
  const done = new Promise<TaskOutcome>((resolve) => {
    let spawnError: Error | undefined
    child.once('error', (e) => {
      spawnError = e
    })
    child.once('close', async (code, signal) => {
      await Promise.all(pumps)
      await Promise.all([closeStream(out), closeStream(err)])
      resolve(exitOutcome(code, signal, spawnError, opts.command[0]!))
    })
  })
  return new TaskHandle(child, done)
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
    stream.on('end', () => {
      if (rest !== '') onLine?.(name, rest, Date.now())
      resolve()
    })
    stream.on('error', () => resolve())
  })
}

function closeStream(s: WriteStream): Promise<void> {
  return new Promise((resolve) => s.end(() => resolve()))
}
