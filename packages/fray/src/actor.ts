/**
 * @module Actors: a class exported from a module, constructed in a host (a worker
 * process, or this process in inline mode) from serializable arguments, and
 * reached through a handle whose methods return promises.
 *
 * @example
 * // counter.ts
 * export class Counter { n = 0; add(k: number) { return (this.n += k) } }
 * // driver.ts
 * const CounterClass = actorClass<typeof Counter>(new URL('./counter.ts', import.meta.url), 'Counter')
 * const counter = await client.createActor(CounterClass, [])
 * await counter.add(2) // → 2, computed in the actor's process
 */
import { pathToFileURL } from 'node:url'
import { isAbsolute } from 'node:path'

/** Any class an actor can be made of. */
// `any[]`: the constructor's parameters are checked where the class is used.
export type ActorClass = abstract new (...args: any[]) => object

/**
 * Where an actor's class lives: a module URL and the name it is exported under.
 * Plain data, so it travels to worker processes and iris tasks; the type parameter
 * only carries the class's shape for the handle's types.
 */
export type ActorClassRef<C extends ActorClass = ActorClass> = {
  readonly module: string
  readonly export: string
  /** Phantom: never set at runtime. */
  readonly __class?: C
}

/**
 * Names an exported actor class. `module` is a URL (use `new URL('./x.ts', import.meta.url)`)
 * or an absolute path.
 * @example actorClass<typeof Counter>(new URL('./counter.ts', import.meta.url), 'Counter')
 */
export function actorClass<C extends ActorClass>(module: string | URL, exportName: string): ActorClassRef<C> {
  const href = module instanceof URL ? module.href : isAbsolute(module) ? pathToFileURL(module).href : module
  return { module: href, export: exportName }
}

type AnyFn = (...args: any[]) => unknown

/** The methods of `T`, each returning a promise of its (awaited) result. */
export type Remote<T> = {
  readonly [K in keyof T as T[K] extends AnyFn ? (K extends string ? K : never) : never]: T[K] extends (
    ...args: infer A
  ) => infer R
    ? (...args: A) => Promise<Awaited<R>>
    : never
}

/** Lifecycle of one actor. `restarting` queues calls; `dead` rejects them. */
export type ActorStatus = 'starting' | 'ready' | 'restarting' | 'dead' | 'stopped'

/** Per-call options. */
export type CallOptions = {
  /** Reject with `CALL_TIMEOUT` after this long; the actor keeps running the call. @default the actor's `callTimeoutMs`
   * (none) */
  timeoutMs?: number
}

/** What a handle knows about its actor, under `handle.$actor` (a name no actor method can take). */
export type ActorControl<T> = {
  readonly name: string
  status(): ActorStatus
  /** The host process's id; `undefined` in inline mode or when the process is gone. */
  pid(): number | undefined
  /** Times the actor was brought back after dying. */
  restarts(): number
  /** Resolves when the actor is constructed (again, after a restart). */
  ready(): Promise<void>
  /** The same methods, with call options. */
  withOptions(opts: CallOptions): Remote<T>
  /**
   * Ends the actor's process as a crash would: sends `signal` to it (inline mode: simulates it;
   * iris backend: iris kills the task, SIGTERM then SIGKILL). Death handling and restarts follow.
   */
  kill(signal?: NodeJS.Signals): void
  /** Stops the actor for good: no restart, pending calls rejected. */
  stop(): Promise<void>
}

/** A typed handle: `handle.method(args)` returns a promise; `handle.$actor` controls the actor. */
export type ActorHandle<T> = Remote<T> & { readonly $actor: ActorControl<T> }

/** The backend side of one actor, which handles are views of. */
export type ActorConnection = {
  readonly name: string
  call(method: string, args: unknown[], opts: CallOptions): Promise<unknown>
  /** Fray's own requests to the actor's host (mesh wiring), outside the actor's methods. */
  control(op: string, arg: unknown): Promise<unknown>
  status(): ActorStatus
  pid(): number | undefined
  restarts(): number
  ready(): Promise<void>
  kill(signal?: NodeJS.Signals): void
  stop(): Promise<void>
  /**
   * Calls `fn` each time the actor died and its restart began (synchronously, before its pending
   * calls are rejected), so requests `fn` makes reach the new incarnation first. Returns the removal.
   */
  onRestart?(fn: () => void): () => void
}

const CONNECTION = Symbol.for('marin.fray.connection')

function remoteOf<T>(conn: ActorConnection, opts: CallOptions): Remote<T> {
  return new Proxy({} as Remote<T>, {
    get(_t, prop) {
      // `then` must stay undefined so that `await handle` does not try to call the actor.
      if (typeof prop === 'symbol' || prop === 'then') return undefined
      return (...args: unknown[]) => conn.call(prop, args, opts)
    },
  })
}

/** Wraps a backend connection into a typed handle. */
export function makeHandle<T>(conn: ActorConnection): ActorHandle<T> {
  const control: ActorControl<T> = {
    name: conn.name,
    status: () => conn.status(),
    pid: () => conn.pid(),
    restarts: () => conn.restarts(),
    ready: () => conn.ready(),
    withOptions: (opts) => remoteOf<T>(conn, opts),
    kill: (signal) => conn.kill(signal),
    stop: () => conn.stop(),
  }
  const none: CallOptions = {}
  return new Proxy({} as ActorHandle<T>, {
    get(_t, prop) {
      if (prop === '$actor') return control
      if (prop === CONNECTION) return conn
      if (typeof prop === 'symbol' || prop === 'then') return undefined
      return (...args: unknown[]) => conn.call(prop, args, none)
    },
  })
}

/** The connection behind a handle (for fray's own wiring: mesh setup, groups). */
export function connectionOf(handle: ActorHandle<unknown>): ActorConnection {
  return (handle as unknown as Record<symbol, ActorConnection>)[CONNECTION]!
}
