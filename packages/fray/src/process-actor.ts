/**
 * @module An actor in its own worker process (`child_process.fork`): real parallelism on the
 * machine's cores, and a crash or SIGKILL takes down only that actor. Calls travel over the
 * process's IPC channel with structured-clone serialization, so typed arrays move as bytes.
 *
 * Why processes and not worker_threads: a process can be killed, restarted and limited on its
 * own, its death has an exit code and signal to report, and it is what iris runs as a task,
 * so the local backend fails the way a cluster does.
 */
import { type ChildProcess, fork } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { logger } from '@marin/rigging'
import type { CallOptions } from './actor.js'
import type { ActorOptions } from './actor-options.js'
import type { ActorSpec } from './actor-runtime.js'
import { ActorDiedError, FrayError } from './errors.js'
import { resources } from './resources.js'
import { ActorBase } from './internal/actor-base.js'
import { actorNodeArgs } from './internal/node-args.js'
import { actorDeaths, actorRestarts } from './internal/telemetry.js'
import { errorFromPayload, type FromWorker, MSG, type ToWorker } from './internal/wire.js'

const log = logger('fray')
const here = import.meta.url
const WORKER_MAIN = fileURLToPath(new URL(here.endsWith('.ts') ? './worker-main.ts' : './worker-main.js', here))

export class ProcessActor extends ActorBase {
  private child: ChildProcess | null = null
  private stopping = false
  private exited: Promise<void> = Promise.resolve()

  private constructor(spec: ActorSpec, opts: ActorOptions) {
    super(spec, opts)
    this.begin(() => this.spawn())
  }

  /** Forks the process; `ready()` resolves once the actor is constructed. */
  static launch(spec: ActorSpec, opts: ActorOptions): ProcessActor {
    return new ProcessActor(spec, opts)
  }

  protected override onIdle(): void {
    this.hold(false)
  }

  protected override onRestartFailed(err: Error): void {
    log.error({ actor: this.name, err }, 'actor restart failed')
  }

  // An idle actor must not keep the driver alive, a pending call must.
  private hold(on: boolean): void {
    const ch = this.child?.channel as { ref?: () => void; unref?: () => void } | undefined
    if (on) ch?.ref?.()
    else ch?.unref?.()
  }

  private spawn(): Promise<void> {
    const child = fork(WORKER_MAIN, [], {
      execArgv: actorNodeArgs(resources(this.opts.resources).cpu),
      serialization: 'advanced',
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      env: { ...process.env, ...this.opts.env },
    })
    this.child = child
    let exited!: () => void
    this.exited = new Promise((r) => (exited = r))
    return new Promise<void>((resolve, reject) => {
      let started = false
      const timeoutMs = this.opts.startTimeoutMs ?? 60_000
      const timer = setTimeout(() => {
        if (started) return
        reject(
          new FrayError(
            'ACTOR_START_FAILED',
            `actor ${this.name} was not ready within ${timeoutMs} ms; raise ` +
              `startTimeoutMs or check its constructor`,
          ),
        )
        child.kill('SIGKILL')
      }, timeoutMs)
      child.on('message', (raw) => {
        const m = raw as FromWorker
        switch (m[0]) {
          case MSG.ok:
            this.pending.resolve(m[1], m[2])
            if (this.pending.size === 0) this.hold(false)
            return
          case MSG.err:
            this.pending.reject(m[1], errorFromPayload(this.name, this.pending.methodOf(m[1]), m[2]))
            if (this.pending.size === 0) this.hold(false)
            return
          case MSG.ready:
            started = true
            clearTimeout(timer)
            this.state = 'ready'
            child.unref()
            if (this.pending.size === 0) this.hold(false)
            resolve()
            return
          case MSG.initFailed:
            started = true
            clearTimeout(timer)
            reject(new FrayError('ACTOR_START_FAILED', m[1].message))
            return
        }
      })
      child.on('error', (err) => {
        if (!started)
          reject(
            new FrayError('ACTOR_START_FAILED', `actor ${this.name}: cannot start its process: ${err.message}`, {
              cause: err,
            }),
          )
      })
      child.on('exit', (code, signal) => {
        clearTimeout(timer)
        exited()
        if (!started) {
          started = true
          reject(
            new FrayError(
              'ACTOR_START_FAILED',
              `actor ${this.name}: its process exited (` +
                `${signal ? `signal ${signal}` : `code ${code}`}) before the ` +
                `actor was ready; see its stderr above`,
            ),
          )
        }
        this.onExit(child, code, signal)
      })
      child.send([MSG.init, this.spec] satisfies ToWorker)
    })
  }

  private onExit(child: ChildProcess, code: number | null, signal: NodeJS.Signals | null): void {
    if (child !== this.child) return
    this.child = null
    const died = new ActorDiedError(this.name, code, signal)
    if (!this.stopping)
      log.warn({ actor: this.name, exitCode: code, signal, pendingCalls: this.pending.size }, 'actor process died')
    if (this.stopping) {
      this.pending.rejectAll(died)
      this.state = 'stopped'
      return
    }
    actorDeaths.inc()
    if (this.afterDeath(died, () => this.spawn(), this.state !== 'starting')) {
      actorRestarts.inc()
      log.info({ actor: this.name, restart: this.restarts(), maxRestarts: this.opts.maxRestarts }, 'restarting actor')
    }
  }

  call(method: string, args: unknown[], opts: CallOptions): Promise<unknown> {
    return this.request(MSG.call, method, args, opts.timeoutMs ?? this.opts.callTimeoutMs)
  }

  control(op: string, arg: unknown): Promise<unknown> {
    return this.request(MSG.control, op, arg, undefined)
  }

  private request(
    kind: typeof MSG.call | typeof MSG.control,
    what: string,
    payload: unknown,
    timeoutMs: number | undefined,
  ): Promise<unknown> {
    return this.gate(() => {
      const child = this.child
      if (!child) return null
      if (this.pending.size === 0) this.hold(true)
      const { id, promise } = this.pending.add(this.name, what, timeoutMs)
      try {
        child.send([kind, id, what, payload] as ToWorker)
      } catch (err) {
        this.pending.reject(
          id,
          new FrayError(
            'NOT_SERIALIZABLE',
            `actor ${this.name}.${what}: arguments cannot be sent to the ` +
              `actor (${(err as Error).message}); pass plain data or typed arrays`,
          ),
        )
      }
      return promise
    })
  }

  pid(): number | undefined {
    return this.child?.pid
  }

  kill(signal: NodeJS.Signals = 'SIGKILL'): void {
    this.child?.kill(signal)
  }

  async stop(): Promise<void> {
    this.stopping = true
    const child = this.child
    if (!child) {
      if (this.state !== 'dead') this.state = 'stopped'
      return
    }
    // Ask nicely, then insist: a wedged actor must not keep the driver from exiting.
    const force = setTimeout(() => child.kill('SIGKILL'), 5_000)
    try {
      if (child.connected) child.send([MSG.stop] satisfies ToWorker)
      else child.kill('SIGTERM')
    } catch {
      child.kill('SIGKILL')
    }
    await this.exited
    clearTimeout(force)
    this.state = 'stopped'
  }
}
