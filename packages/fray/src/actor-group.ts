/**
 * @module A group of actors of one class: per-member handles, readiness, calls broadcast to
 * every member, and which members are gone. The unit a `Mesh` is laid over.
 */
import { type ActorHandle, connectionOf } from './actor.js'
import { FrayError } from './errors.js'

type AnyFn = (...args: any[]) => unknown

/** The methods of `T`, each called on every member and returning all results in member order. */
export type Broadcast<T> = {
  readonly [K in keyof T as T[K] extends AnyFn ? (K extends string ? K : never) : never]: T[K] extends (
    ...args: infer A
  ) => infer R
    ? (...args: A) => Promise<Awaited<R>[]>
    : never
}

export type WaitReadyOptions = {
  /** Members that must be ready. @default all */
  count?: number
  /** Reject with `ACTOR_START_FAILED` after this long. @default none */
  timeoutMs?: number
}

export class ActorGroup<T> {
  /** `group.broadcast.step(lr)` calls `step(lr)` on every member. */
  readonly broadcast: Broadcast<T>

  constructor(readonly members: readonly ActorHandle<T>[]) {
    this.broadcast = new Proxy({} as Broadcast<T>, {
      get: (_t, prop) => {
        if (typeof prop === 'symbol' || prop === 'then') return undefined
        return (...args: unknown[]) =>
          Promise.all(
            this.members.map((m) =>
              (m as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>)[prop]!(...args),
            ),
          )
      },
    })
  }

  get size(): number {
    return this.members.length
  }

  /** The handle of member `i`. */
  member(i: number): ActorHandle<T> {
    const m = this.members[i]
    if (!m) throw new FrayError('ACTOR_NOT_FOUND', `actor group has ${this.size} members; member ${i} does not exist`)
    return m
  }

  /**
   * Resolves with the ready members once `count` of them are constructed; rejects with the
   * first start failure that makes `count` unreachable.
   */
  waitReady(opts: WaitReadyOptions = {}): Promise<ActorHandle<T>[]> {
    const count = opts.count ?? this.size
    return new Promise((resolve, reject) => {
      const ready: ActorHandle<T>[] = []
      let failed = 0
      let timer: NodeJS.Timeout | undefined
      const done = (fn: () => void) => {
        if (timer) clearTimeout(timer)
        fn()
      }
      if (count <= 0) return resolve([])
      if (opts.timeoutMs !== undefined) {
        timer = setTimeout(
          () =>
            reject(
              new FrayError(
                'ACTOR_START_FAILED',
                `actor group: ${ready.length} of ${count} members ready after ` +
                  `${opts.timeoutMs} ms; raise timeoutMs or check the members' logs`,
              ),
            ),
          opts.timeoutMs,
        )
      }
      for (const m of this.members) {
        connectionOf(m)
          .ready()
          .then(
            () => {
              ready.push(m)
              if (ready.length === count) done(() => resolve(this.members.filter((x) => ready.includes(x))))
            },
            (err: Error) => {
              failed++
              if (this.size - failed < count) done(() => reject(err))
            },
          )
      }
    })
  }

  /** Indices of members that are dead (no restart left) or stopped. */
  gone(): number[] {
    return this.members.flatMap((m, i) => (['dead', 'stopped'].includes(m.$actor.status()) ? [i] : []))
  }

  /** Indices of members that can still take calls (ready, starting or restarting). */
  alive(): number[] {
    const gone = new Set(this.gone())
    return this.members.flatMap((_, i) => (gone.has(i) ? [] : [i]))
  }

  /** Stops every member. */
  async shutdown(): Promise<void> {
    await Promise.all(this.members.map((m) => m.$actor.stop()))
  }
}
