/**
 * @module The local backend: actors in worker processes (`mode: 'process'`, the default) or in
 * this process (`mode: 'inline'`, for tests), and jobs as child processes.
 *
 * @example
 * const client = new LocalClient()
 * const group = await client.createActorGroup(Worker, 4, (i) => [i])
 * await group.waitReady()
 * const results = await group.broadcast.run(task)
 * await client.shutdown()
 */
import type { ActorClass, ActorClassRef, ActorConnection, ActorHandle } from './actor.js'
import type { ActorGroup } from './actor-group.js'
import type { ActorOptions } from './actor-options.js'
import type { ActorSpec } from './actor-runtime.js'
import type { Client, GroupArgs } from './client.js'
import { FrayError } from './errors.js'
import { createActorGroupWith, createActorWith, type Launch } from './internal/create-actors.js'
import { InlineActor } from './inline-actor.js'
import { type JobHandle, type JobRequestInput, jobRequest } from './job.js'
import { LocalJob } from './local-job.js'
import { ProcessActor } from './process-actor.js'
import { resources } from './resources.js'
import { DeferredActor } from './remote/deferred-actor.js'
import { DriverRegistry } from './remote/registry.js'
import { RemoteActor } from './remote/remote-actor.js'
import { localSpawner } from './remote/spawner.js'

export type LocalClientOptions = {
  /**
   * `'process'`: one worker process per actor, calls over its IPC channel;
   * `'inline'`: actors in this process (tests);
   * `'grpc'`: one host process per actor reached over ducky, the iris backend's transport.
   * @default 'process'
   */
  mode?: 'process' | 'inline' | 'grpc'
}

let counter = 0

export class LocalClient implements Client {
  readonly backend: 'process' | 'inline' | 'grpc'
  private registry: Promise<DriverRegistry> | null = null
  private readonly actors = new Set<ActorConnection>()
  private readonly jobs = new Set<JobHandle>()
  private closed = false

  constructor(opts: LocalClientOptions = {}) {
    this.backend = opts.mode ?? 'process'
  }

  private readonly launch: Launch = (
    cls: ActorClassRef,
    args: readonly unknown[],
    opts: ActorOptions,
    index: number,
    groupSize: number,
    name: string,
  ): ActorConnection => {
    if (this.closed) throw new FrayError('CLIENT_SHUT_DOWN', 'this LocalClient was shut down; create a new one')
    resources(opts.resources)
    const spec: ActorSpec = { name, cls: { module: cls.module, export: cls.export }, args, index, groupSize }
    const conn =
      this.backend === 'inline'
        ? InlineActor.launch(spec, opts)
        : this.backend === 'grpc'
          ? new DeferredActor(
              name,
              (this.registry ??= DriverRegistry.start()).then((reg) =>
                RemoteActor.launch(spec, opts, reg, localSpawner),
              ),
            )
          : ProcessActor.launch(spec, opts)
    this.actors.add(conn)
    return conn
  }

  async createActor<C extends ActorClass>(
    cls: ActorClassRef<C>,
    args: NoInfer<ConstructorParameters<C>>,
    opts: ActorOptions = {},
  ): Promise<ActorHandle<InstanceType<C>>> {
    return createActorWith(this.launch, opts.name ?? `${cls.export}-${++counter}`, cls, args, opts)
  }

  async createActorGroup<C extends ActorClass>(
    cls: ActorClassRef<C>,
    n: number,
    args: NoInfer<GroupArgs<C>>,
    opts: ActorOptions = {},
  ): Promise<ActorGroup<InstanceType<C>>> {
    return createActorGroupWith(this.launch, opts.name ?? `${cls.export}-${++counter}`, cls, n, args, opts)
  }

  async submit(req: JobRequestInput): Promise<JobHandle> {
    if (this.closed) throw new FrayError('CLIENT_SHUT_DOWN', 'this LocalClient was shut down; create a new one')
    const r = jobRequest(req)
    const job = new LocalJob(`${r.name}-${++counter}`, r)
    this.jobs.add(job)
    return job
  }

  async shutdown(): Promise<void> {
    this.closed = true
    await Promise.all([...this.actors].map((a) => a.stop().catch(() => {})))
    await Promise.all([...this.jobs].map((j) => j.terminate().catch(() => {})))
    this.actors.clear()
    this.jobs.clear()
    if (this.registry) await (await this.registry).close()
  }
}
