/**
 * @module The `Client`: what creates actors and submits jobs, whatever the backend;
 * `currentClient()` / `withClient()` pick it from the async context, so library code
 * (zephyr, levanter) runs on whichever cluster its caller chose.
 */
import { AsyncLocalStorage } from 'node:async_hooks'
import type { ActorClass, ActorClassRef, ActorHandle } from './actor.js'
import type { ActorGroup } from './actor-group.js'
import type { ActorOptions } from './actor-options.js'
import type { JobHandle, JobRequestInput } from './job.js'
import { LocalClient } from './local-client.js'

/** Constructor arguments of member `i`, or the same for all. */
export type GroupArgs<C extends ActorClass> = ConstructorParameters<C> | ((index: number) => ConstructorParameters<C>)

export type Client = {
  /** `'process'`, `'inline'` and `'grpc'` are the local backend's modes. */
  readonly backend: 'process' | 'inline' | 'grpc' | 'iris'
  /** Builds one actor and resolves once it is constructed. */
  createActor<C extends ActorClass>(
    cls: ActorClassRef<C>,
    args: NoInfer<ConstructorParameters<C>>,
    opts?: ActorOptions,
  ): Promise<ActorHandle<InstanceType<C>>>
  /** Starts `n` actors of one class; `await group.waitReady()` before relying on all of them. */
  createActorGroup<C extends ActorClass>(
    cls: ActorClassRef<C>,
    n: number,
    args: NoInfer<GroupArgs<C>>,
    opts?: ActorOptions,
  ): Promise<ActorGroup<InstanceType<C>>>
  /** Runs a job to completion in the background. */
  submit(req: JobRequestInput): Promise<JobHandle>
  /** Stops every actor and job this client started. */
  shutdown(): Promise<void>
}

const KEY = Symbol.for('marin.fray.client')
const g = globalThis as unknown as Record<
  symbol,
  { store: AsyncLocalStorage<Client>; fallback: Client | null } | undefined
>
const slot = (g[KEY] ??= { store: new AsyncLocalStorage<Client>(), fallback: null })

/**
 * Runs `fn` with `client` as the current client (for everything `fn` awaits too).
 * @example await withClient(new LocalClient(), () => zephyrPipeline.run())
 */
export function withClient<R>(client: Client, fn: () => R): R {
  return slot.store.run(client, fn)
}

/** Makes `client` the current client wherever no `withClient` applies (pass `null` to clear). */
export function setDefaultClient(client: Client | null): void {
  slot.fallback = client
}

/**
 * The client of the enclosing `withClient`, else the default one, else (as in Python fray) a
 * process-mode `LocalClient` made on first use. Idle actors never keep the process alive.
 */
export function currentClient(): Client {
  const c = slot.store.getStore() ?? slot.fallback
  if (c) return c
  slot.fallback = new LocalClient()
  return slot.fallback
}
