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
import { IrisClient } from '@marin/iris'
import type { IrisClientOptions } from '@marin/iris'
import type { ActorConnection } from './actor.js'
import type { ActorOptions } from './actor-options.js'
import type { ActorSpec } from './actor-runtime.js'
import type { Client } from './client.js'
import { ClientBase } from './internal/client-base.js'
import type { JobHandle, JobRequest } from './job.js'
import { DeferredActor } from './remote/deferred-actor.js'
import { submitIrisJob } from './remote/iris-job.js'
import { irisSpawner } from './remote/iris-spawner.js'
import { DriverRegistry } from './remote/registry.js'
import { RemoteActor } from './remote/remote-actor.js'

export type FrayIrisClientOptions = {
  /**
   * The cluster's controller client (e.g. `cluster.client()` of a `LocalCluster`; it stays the
   * caller's), or where to reach the controller (`{ controller: 'host:port', token }`: the client
   * opens that connection and closes it at shutdown).
   */
  iris: IrisClient | IrisClientOptions
  /** Interface the driver's registry listens on; hosts must reach it. @default '127.0.0.1' */
  driverHost?: string
  /** Where actor hosts listen, and the address they give out. @default '127.0.0.1' for both */
  hostListen?: string
  hostAdvertise?: string
}

/** Stops every actor and job it started on shutdown; an iris client passed in stays open (it is the caller's). */
export class FrayIrisClient extends ClientBase implements Client {
  readonly backend = 'iris' as const
  private readonly iris: IrisClient
  private readonly ownsIris: boolean

  constructor(private readonly opts: FrayIrisClientOptions) {
    super()
    this.ownsIris = !(opts.iris instanceof IrisClient)
    this.iris = opts.iris instanceof IrisClient ? opts.iris : new IrisClient(opts.iris)
  }

  override async shutdown(): Promise<void> {
    await super.shutdown()
    if (this.ownsIris) this.iris.close()
  }

  protected startActor(spec: ActorSpec, opts: ActorOptions): ActorConnection {
    const env: Record<string, string> = {
      FRAY_LISTEN_HOST: this.opts.hostListen ?? '127.0.0.1',
      FRAY_ADVERTISE_HOST: this.opts.hostAdvertise ?? this.opts.hostListen ?? '127.0.0.1',
      ...opts.env,
    }
    const spawner = irisSpawner(this.iris, { env })
    this.registry ??= DriverRegistry.start(this.opts.driverHost)
    return new DeferredActor(
      spec.name,
      this.registry.then((reg) => RemoteActor.launch(spec, opts, reg, spawner)),
    )
  }

  protected startJob(req: JobRequest): Promise<JobHandle> {
    return submitIrisJob(this.iris, req)
  }
}
