/**
 * @module An actor in the driver's own process: no fork, no serialization (arguments are
 * passed by reference), for tests and debugging. Failure is simulated faithfully enough to
 * test callers: `kill()` rejects pending calls with `ActorDiedError` and honours `maxRestarts`.
 */
import type { CallOptions } from './actor.js'
import type { ActorOptions } from './actor-options.js'
import { ActorRuntime, type ActorSpec } from './actor-runtime.js'
import { ActorDiedError, FrayError, isFrayError } from './errors.js'
import { ActorBase } from './internal/actor-base.js'

export class InlineActor extends ActorBase {
  private runtime: ActorRuntime | null = null
  /** Bumped on every (re)construction, so answers from a killed incarnation are dropped. */
  private epoch = 0

  private constructor(spec: ActorSpec, opts: ActorOptions) {
    super(spec, opts)
    this.begin(() => this.construct())
  }

  /** Starts constructing; `ready()` resolves once the actor is built. */
  static launch(spec: ActorSpec, opts: ActorOptions): InlineActor {
    return new InlineActor(spec, opts)
  }

  private async construct(): Promise<void> {
    const epoch = ++this.epoch
    const rt = await ActorRuntime.create(this.spec)
    if (epoch !== this.epoch) return
    this.runtime = rt
    this.state = 'ready'
  }

  call(method: string, args: unknown[], opts: CallOptions): Promise<unknown> {
    return this.request((rt) => rt.call(method, args), method, opts.timeoutMs ?? this.opts.callTimeoutMs)
  }

  control(op: string, arg: unknown): Promise<unknown> {
    return this.request((rt) => rt.control(op, arg), op, undefined)
  }

  private request(
    run: (rt: ActorRuntime) => Promise<unknown>,
    what: string,
    timeoutMs: number | undefined,
  ): Promise<unknown> {
    return this.gate(() => {
      const rt = this.runtime
      if (!rt) return null
      const { id, promise } = this.pending.add(this.name, what, timeoutMs)
      const epoch = this.epoch
      run(rt).then(
        (v) => epoch === this.epoch && this.pending.resolve(id, v),
        (e: unknown) => epoch === this.epoch && this.pending.reject(id, methodError(this.name, what, e)),
      )
      return promise
    })
  }

  pid(): number | undefined {
    return undefined
  }

  /** Simulates the death of the actor's process by `signal`. */
  kill(signal: NodeJS.Signals = 'SIGKILL'): void {
    if (this.state !== 'ready' && this.state !== 'restarting') return
    const rt = this.runtime
    this.runtime = null
    this.epoch++
    void rt?.close().catch(() => {})
    this.afterDeath(new ActorDiedError(this.name, null, signal), () => this.construct())
  }

  async stop(): Promise<void> {
    const rt = this.runtime
    this.runtime = null
    this.epoch++
    this.state = 'stopped'
    this.pending.rejectAll(
      new ActorDiedError(this.name, 0, null, `actor ${this.name} was stopped while calls were pending`),
    )
    await rt?.close()
  }
}

/** The same error a worker process would report: fray's own errors as they are, others wrapped. */
function methodError(actor: string, method: string, e: unknown): FrayError {
  if (isFrayError(e)) return e
  const err = e instanceof Error ? e : new Error(String(e))
  return new FrayError('ACTOR_METHOD_FAILED', `actor ${actor}.${method} threw ${err.name}: ${err.message}`, {
    cause: err,
  })
}
