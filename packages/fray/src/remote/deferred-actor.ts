/** @module An actor connection that exists once an asynchronous setup (a driver registry, a cluster) is done. */
import type { ActorConnection, ActorStatus, CallOptions } from '../actor.js'

export class DeferredActor implements ActorConnection {
  private inner: ActorConnection | null = null
  private failed: Error | null = null

  constructor(
    readonly name: string,
    private readonly pending: Promise<ActorConnection>,
  ) {
    pending.then(
      (c) => (this.inner = c),
      (e: Error) => (this.failed = e),
    )
  }

  private get(): Promise<ActorConnection> {
    return this.inner ? Promise.resolve(this.inner) : this.pending
  }

  call(method: string, args: unknown[], opts: CallOptions): Promise<unknown> {
    return this.inner ? this.inner.call(method, args, opts) : this.get().then((c) => c.call(method, args, opts))
  }
  control(op: string, arg: unknown): Promise<unknown> {
    return this.get().then((c) => c.control(op, arg))
  }
  status(): ActorStatus {
    return this.inner?.status() ?? (this.failed ? 'dead' : 'starting')
  }
  pid(): number | undefined {
    return this.inner?.pid()
  }
  restarts(): number {
    return this.inner?.restarts() ?? 0
  }
  ready(): Promise<void> {
    return this.get().then((c) => c.ready())
  }
  onRestart(fn: () => void): () => void {
    if (this.inner) return this.inner.onRestart?.(fn) ?? (() => {})
    let off: (() => void) | undefined
    let removed = false
    void this.get().then(
      (c) => {
        if (!removed) off = c.onRestart?.(fn)
      },
      () => {},
    )
    return () => {
      removed = true
      off?.()
    }
  }
  kill(signal?: NodeJS.Signals): void {
    void this.get().then((c) => c.kill(signal))
  }
  stop(): Promise<void> {
    return this.get().then(
      (c) => c.stop(),
      () => undefined,
    )
  }
}
