/**
 * @module What every client shares: actor and group creation, job bookkeeping and shutdown.
 * A backend only says how one actor connection starts from its spec and how a job starts;
 * handles, readiness, groups, naming and the closed gate are the same everywhere.
 */
import { type ActorClass, type ActorClassRef, type ActorConnection, type ActorHandle, makeHandle } from '../actor.js'
import { ActorGroup } from '../actor-group.js'
import type { ActorOptions } from '../actor-options.js'
import type { ActorSpec } from '../actor-runtime.js'
import type { Client, GroupArgs } from '../client.js'
import { FrayError } from '../errors.js'
import { type JobHandle, type JobRequest, type JobRequestInput, jobRequest } from '../job.js'
import { resources } from '../resources.js'
import type { DriverRegistry } from '../remote/registry.js'

let counter = 0

/** A fresh number for names made in this process (`Worker-3`, `train-4`). */
export const nextId = (): number => ++counter

export abstract class ClientBase implements Pick<Client, 'createActor' | 'createActorGroup' | 'submit' | 'shutdown'> {
  /** The registry actor hosts call back to, started by the first backend that needs one. */
  protected registry: Promise<DriverRegistry> | null = null
  private readonly actors = new Set<ActorConnection>()
  private readonly jobs = new Set<JobHandle>()
  private closed = false

  /** Starts one actor connection (member `spec.index` of a group of `spec.groupSize`). */
  protected abstract startActor(spec: ActorSpec, opts: ActorOptions): ActorConnection
  /** Starts one job. */
  protected abstract startJob(req: JobRequest): Promise<JobHandle>

  private launch(
    cls: ActorClassRef,
    args: readonly unknown[],
    opts: ActorOptions,
    index: number,
    groupSize: number,
    name: string,
  ) {
    this.assertOpen()
    resources(opts.resources)
    const conn = this.startActor(
      { name, cls: { module: cls.module, export: cls.export }, args, index, groupSize },
      opts,
    )
    this.actors.add(conn)
    return conn
  }

  private assertOpen(): void {
    if (this.closed) {
      throw new FrayError('CLIENT_SHUT_DOWN', `this ${this.constructor.name} was shut down; create a new one`)
    }
  }

  async createActor<C extends ActorClass>(
    cls: ActorClassRef<C>,
    args: NoInfer<ConstructorParameters<C>>,
    opts: ActorOptions = {},
  ): Promise<ActorHandle<InstanceType<C>>> {
    const conn = this.launch(cls, args, opts, 0, 1, opts.name ?? `${cls.export}-${nextId()}`)
    await conn.ready()
    return makeHandle<InstanceType<C>>(conn)
  }

  /** `n` actors named `base/0` … `base/n-1`; `args` may give each member its own arguments. */
  async createActorGroup<C extends ActorClass>(
    cls: ActorClassRef<C>,
    n: number,
    args: NoInfer<GroupArgs<C>>,
    opts: ActorOptions = {},
  ): Promise<ActorGroup<InstanceType<C>>> {
    if (!Number.isInteger(n) || n < 1) {
      throw new FrayError('INVALID_RESOURCES', `createActorGroup: n=${n} must be a positive integer`)
    }
    const base = opts.name ?? `${cls.export}-${nextId()}`
    const members = Array.from({ length: n }, (_, i) => {
      const a = typeof args === 'function' ? args(i) : args
      return makeHandle<InstanceType<C>>(this.launch(cls, a, opts, i, n, `${base}/${i}`))
    })
    return new ActorGroup(members)
  }

  async submit(req: JobRequestInput): Promise<JobHandle> {
    this.assertOpen()
    const job = await this.startJob(jobRequest(req))
    this.jobs.add(job)
    return job
  }

  /** Stops every actor and job this client started. */
  async shutdown(): Promise<void> {
    this.closed = true
    await Promise.all([...this.actors].map((a) => a.stop().catch(() => {})))
    await Promise.all([...this.jobs].map((j) => j.terminate().catch(() => {})))
    this.actors.clear()
    this.jobs.clear()
    if (this.registry) await (await this.registry).close()
  }
}
