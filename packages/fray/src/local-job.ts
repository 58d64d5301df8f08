/**
 * @module Jobs on the local backend: each replica is a child process; output is captured
 * line by line; a failed replica is retried up to `maxRetries` times.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { createRequire } from 'node:module'
import { isAbsolute } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { logger } from '@marin/rigging'
import { FrayError } from './errors.js'
import type { JobHandle, JobRequest, JobStatus, JobWaitOptions } from './job.js'

const log = logger('fray')
const here = import.meta.url
const JOB_MAIN = fileURLToPath(new URL(here.endsWith('.ts') ? './job-main.ts' : './job-main.js', here))
const MAX_LOG_LINES = 10_000

/** The argv and extra environment that run a request's entrypoint (a callable runs through job-main). */
export function jobCommand(req: JobRequest): { command: string[]; env: Record<string, string> } {
  const e = req.entrypoint
  if ('command' in e) return { command: [...e.command], env: {} }
  const loader = pathToFileURL(createRequire(here).resolve('tsx')).href
  const module = isAbsolute(e.module) ? pathToFileURL(e.module).href : e.module
  return {
    command: [process.execPath, '--import', loader, JOB_MAIN],
    env: { FRAY_JOB_SPEC: JSON.stringify({ module, export: e.export, args: e.args }) },
  }
}

type Replica = {
  child: ChildProcess | null
  attempts: number
  exit: { code: number | null; signal: string | null } | null
  done: boolean
}

export class LocalJob implements JobHandle {
  private readonly lines: string[] = []
  private readonly replicas: Replica[]
  private state: JobStatus = 'pending'
  private terminated = false
  private userTerminated = false
  private readonly finished: Promise<JobStatus>
  private finish!: (s: JobStatus) => void

  constructor(
    readonly jobId: string,
    private readonly req: JobRequest,
  ) {
    this.finished = new Promise((r) => (this.finish = r))
    this.replicas = Array.from({ length: req.resources.replicas }, () => ({
      child: null,
      attempts: 0,
      exit: null,
      done: false,
    }))
    this.replicas.forEach((_, i) => this.start(i))
    this.state = 'running'
  }

  private start(i: number): void {
    const r = this.replicas[i]!
    r.attempts++
    const { command, env: jobEnv } = jobCommand(this.req)
    const [cmd, ...args] = command as [string, ...string[]]
    const env: Record<string, string | undefined> = {
      ...process.env,
      ...this.req.env,
      ...jobEnv,
      FRAY_JOB_ID: this.jobId,
      FRAY_REPLICA_INDEX: String(i),
      FRAY_REPLICA_COUNT: String(this.replicas.length),
    }
    const child = spawn(cmd, args, { cwd: this.req.cwd, env, stdio: ['ignore', 'pipe', 'pipe'] })
    r.child = child
    const prefix = this.replicas.length > 1 ? `[${i}] ` : ''
    for (const stream of [child.stdout!, child.stderr!]) {
      let rest = ''
      stream.setEncoding('utf8')
      stream.on('data', (d: string) => {
        const parts = (rest + d).split('\n')
        rest = parts.pop()!
        for (const p of parts) this.log(prefix + p)
      })
      stream.on('end', () => rest && this.log(prefix + rest))
    }
    child.on('error', (err) => this.log(`${prefix}cannot start ${cmd}: ${err.message}`))
    child.on('close', (code, signal) => this.onExit(i, child, code, signal))
  }

  private log(line: string): void {
    this.lines.push(line)
    if (this.lines.length > MAX_LOG_LINES) this.lines.splice(0, this.lines.length - MAX_LOG_LINES)
  }

  private onExit(i: number, child: ChildProcess, code: number | null, signal: string | null): void {
    const r = this.replicas[i]!
    if (r.child !== child) return
    r.child = null
    r.exit = { code, signal }
    if (code !== 0 && !this.terminated && r.attempts <= this.req.maxRetries) {
      this.log(`replica ${i} exited (${signal ?? `code ${code}`}); retry ${r.attempts} of ${this.req.maxRetries}`)
      log.info({ jobId: this.jobId, replica: i, exitCode: code, signal, attempt: r.attempts }, 'retrying job replica')
      this.start(i)
      return
    }
    r.done = true
    if (!this.replicas.every((x) => x.done)) {
      // One failed replica fails the job: stop the others rather than let them run on.
      if (code !== 0 && !this.terminated) void this.stopAll()
      return
    }
    const ok = this.replicas.every((x) => x.exit?.code === 0)
    this.state = this.userTerminated ? 'stopped' : ok ? 'succeeded' : 'failed'
    this.finish(this.state)
  }

  async status(): Promise<JobStatus> {
    return this.state
  }

  async logs(): Promise<string[]> {
    return [...this.lines]
  }

  async wait(opts: JobWaitOptions = {}): Promise<JobStatus> {
    let timer: NodeJS.Timeout | undefined
    const timeout = new Promise<never>((_, rej) => {
      if (opts.timeoutMs !== undefined) {
        timer = setTimeout(
          () =>
            rej(
              new FrayError(
                'JOB_TIMEOUT',
                `job ${this.jobId} still ${this.state} after ${opts.timeoutMs} ` +
                  `ms; it keeps running: terminate() it or wait longer`,
              ),
            ),
          opts.timeoutMs,
        )
      }
    })
    try {
      const s = await Promise.race([this.finished, timeout])
      if (s === 'failed' && (opts.raiseOnFailure ?? true)) {
        const failedAt = this.replicas.findIndex((r) => r.exit?.code !== 0)
        const ex = this.replicas[failedAt]?.exit
        throw new FrayError(
          'JOB_FAILED',
          `job ${this.jobId}: replica ${failedAt} exited with ` +
            `${ex?.signal ? `signal ${ex.signal}` : `code ${ex?.code}`}; ` +
            `last output:\n${this.lines.slice(-10).join('\n')}`,
        )
      }
      return s
    } finally {
      if (timer) clearTimeout(timer)
    }
  }

  private async stopAll(): Promise<void> {
    this.terminated = true
    const live = this.replicas.flatMap((r) => (r.child ? [r.child] : []))
    for (const c of live) c.kill('SIGTERM')
    const force = setTimeout(() => live.forEach((c) => c.kill('SIGKILL')), 3_000)
    await Promise.all(
      live.map((c) =>
        c.exitCode !== null || c.signalCode !== null ? Promise.resolve() : new Promise((r) => c.once('close', r)),
      ),
    )
    clearTimeout(force)
  }

  async terminate(): Promise<void> {
    if (this.replicas.every((r) => r.done)) return
    this.userTerminated = true
    await this.stopAll()
    await this.finished
  }
}
