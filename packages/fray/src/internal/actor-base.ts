/**
 * @module What every actor transport (in-process, worker process, remote host) shares: the state
 * gate calls pass, the accessors behind `handle.$actor`, and what happens when the actor dies
 * (pending calls rejected, then a restart while `maxRestarts` allows, else dead).
 */
import type { ActorConnection, ActorStatus, CallOptions } from '../actor.js'
import type { ActorOptions } from '../actor-options.js'
import type { ActorSpec } from '../actor-runtime.js'
import { ActorDiedError, FrayError } from '../errors.js'
import { PendingCalls } from './pending.js'
import { RestartListeners } from './restart-listeners.js'

export abstract class ActorBase implements ActorConnection {
  protected state: ActorStatus = 'starting'
  protected readonly pending = new PendingCalls(() => this.onIdle())
  private readonly restartListeners = new RestartListeners()
  private readyPromise: Promise<void> = Promise.resolve()
  private restartCount = 0
  private death: Error | null = null

  protected constructor(
    protected readonly spec: ActorSpec,
    protected readonly opts: ActorOptions,
  ) {}

  get name(): string {
    return this.spec.name
  }

  abstract call(method: string, args: unknown[], opts: CallOptions): Promise<unknown>
  abstract control(op: string, arg: unknown): Promise<unknown>
  abstract pid(): number | undefined
  abstract kill(signal?: NodeJS.Signals): void
  abstract stop(): Promise<void>

  status(): ActorStatus {
    return this.state
  }

  restarts(): number {
    return this.restartCount
  }

  onRestart(fn: () => void): () => void {
    return this.restartListeners.add(fn)
  }

  ready(): Promise<void> {
    return this.readyPromise
  }

  /** Starts (or restarts) the actor: `ready()` settles with `start()`. */
  protected begin(start: () => Promise<void>): Promise<void> {
    this.readyPromise = start()
    this.readyPromise.catch(() => {})
    return this.readyPromise
  }

  /**
   * The state gate: when the actor is ready, `send` runs now (it returns `null` when the transport
   * has no connection after all); while it starts or restarts, the call waits; once it is dead or
   * stopped, the call is refused.
   */
  protected gate(send: () => Promise<unknown> | null): Promise<unknown> {
    if (this.state === 'ready') {
      const sent = send()
      if (sent) return sent
    }
    if (this.state === 'dead') return Promise.reject(this.death ?? new ActorDiedError(this.name, null, null))
    if (this.state === 'stopped')
      return Promise.reject(new FrayError('CLIENT_SHUT_DOWN', `actor ${this.name} was stopped; create it again`))
    return this.readyPromise.then(() => this.gate(send))
  }

  /**
   * The actor died of `died`: pending calls are rejected with it, then `restart` begins when
   * `canRestart` and `maxRestarts` allow (restart listeners hear of it first), else the actor is
   * dead and later calls get `died`. Returns whether a restart began.
   */
  protected afterDeath(died: ActorDiedError, restart: () => Promise<void>, canRestart = true): boolean {
    this.pending.rejectAll(died)
    if (canRestart && this.restartCount < (this.opts.maxRestarts ?? 0)) {
      this.restartCount++
      this.state = 'restarting'
      this.begin(restart).catch((err: Error) => {
        this.onRestartFailed(err)
        this.state = 'dead'
        this.death = err
      })
      this.restartListeners.emit()
      return true
    }
    this.state = 'dead'
    this.death = died
    return false
  }

  /** Runs when a call's timeout leaves no call pending. */
  protected onIdle(): void {}

  /** Runs when a restart failed, before the actor is marked dead. */
  protected onRestartFailed(_err: Error): void {}
}
