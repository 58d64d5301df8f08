/**
 * @module The iris backend: every actor is an iris job with one task running an actor host,
 * reached over ducky; jobs are iris jobs. The driver serves a small registry that hosts call
 * back to, so hosts may run on any worker that can reach the driver.
 *
 * @example
 * const cluster = await LocalCluster.start({ workers: 2 })
 * const client = new FrayIrisClient({ iris: cluster.client() })
 * const group = await client.createActorGroup(Replica, 2, (i) => [i])
 */
import type { IrisClient } from '@marin/iris'
import type { ActorClass, ActorClassRef, ActorConnection, ActorHandle } from './actor.js'
import type { ActorGroup } from './actor-group.js'
import type { ActorOptions } from './actor-options.js'
import type { ActorSpec } from './actor-runtime.js'
import type { Client, GroupArgs } from './client.js'
import { FrayError } from './errors.js'
import { createActorGroupWith, createActorWith, type Launch } from './internal/create-actors.js'
import { type JobHandle, type JobRequestInput, jobRequest } from './job.js'
import { resources } from './resources.js'
import { DeferredActor } from './remote/deferred-actor.js'
import { submitIrisJob } from './remote/iris-job.js'
import { irisSpawner } from './remote/iris-spawner.js'
import { DriverRegistry } from './remote/registry.js'
import { RemoteActor } from './remote/remote-actor.js'

export type FrayIrisClientOptions = {
  /** The cluster's controller client (e.g. `cluster.client()` of a `LocalCluster`). */
  iris: IrisClient
  /** Interface the driver's registry listens on; hosts must reach it. @default '127.0.0.1' */
  driverHost?: string
  /** Where actor hosts listen, and the address they give out. @default '127.0.0.1' for both */
  hostListen?: string
  hostAdvertise?: string
}

let counter = 0

export class FrayIrisClient implements Client {
  readonly backend = 'iris' as const
  private readonly iris: IrisClient
  private registry: Promise<DriverRegistry> | null = null
  private readonly actors = new Set<ActorConnection>()
  private readonly jobs = new Set<JobHandle>()
  private closed = false

  constructor(private readonly opts: FrayIrisClientOptions) {
    this.iris = opts.iris
  }

  private readonly launch: Launch = (
    cls: ActorClassRef,
    args: readonly unknown[],
    opts: ActorOptions,
    index: number,
    groupSize: number,
    name: string,
  ): ActorConnection => {
    if (this.closed) throw new FrayError('CLIENT_SHUT_DOWN', 'this FrayIrisClient was shut down; create a new one')
    resources(opts.resources)
    const spec: ActorSpec = { name, cls: { module: cls.module, export: cls.export }, args, index, groupSize }
    const env: Record<string, string> = {
      FRAY_LISTEN_HOST: this.opts.hostListen ?? '127.0.0.1',
      FRAY_ADVERTISE_HOST: this.opts.hostAdvertise ?? this.opts.hostListen ?? '127.0.0.1',
      ...opts.env,
    }
    const spawner = irisSpawner(this.iris, { env })
    this.registry ??= DriverRegistry.start(this.opts.driverHost)
    const conn = new DeferredActor(
      name,
      this.registry.then((reg) => RemoteActor.launch(spec, opts, reg, spawner)),
    )
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
    if (this.closed) throw new FrayError('CLIENT_SHUT_DOWN', 'this FrayIrisClient was shut down; create a new one')
    const job = await submitIrisJob(this.iris, jobRequest(req))
    this.jobs.add(job)
    return job
  }

  /** Stops every actor and job this client started; the iris client stays open (it is the caller's). */
  async shutdown(): Promise<void> {
    this.closed = true
    await Promise.all([...this.actors].map((a) => a.stop().catch(() => {})))
    await Promise.all([...this.jobs].map((j) => j.terminate().catch(() => {})))
    this.actors.clear()
    this.jobs.clear()
    if (this.registry) await (await this.registry).close()
  }
}
