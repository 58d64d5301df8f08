/**
 * @module The iris backend: every actor is an iris job with one task running an actor host,
 * reached over ducky; jobs are iris jobs. The driver serves a small registry that hosts call
 * back to, so hosts may run on any worker that can reach the driver.
 *
 * @example
 * const cluster = await LocalCluster.start({ workers: 2 })
 * const client = new FrayIrisClient({ iris: cluster.client() })
 * const group = await client.createActorGroup(Replica, 2, (i) => [i])
 * // or a cluster the client starts, whose tasks are Kubernetes Pods:
 * const k8s = new FrayIrisClient({ iris: { platform: 'k8s', namespace: 'ml' } })
 */
import { IrisClient, LocalCluster, kubernetesPlatform } from '@marin/iris'
import type { IrisClientOptions, KubernetesPlatformOptions } from '@marin/iris'
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

/**
 * A cluster the client starts in this process and stops at shutdown: `platform: 'local'` runs tasks as processes
 * here (`workers` of them); `platform: 'k8s'` runs each task as a Pod in `namespace` (the options of
 * `kubernetesPlatform`; `iris cluster start --platform k8s` in code). State lives in `<prefix>/iris`.
 */
export type FrayIrisClusterOptions =
  | { platform: 'local'; prefix?: string; workers?: number }
  | ({ platform: 'k8s'; prefix?: string } & KubernetesPlatformOptions)

export type FrayIrisClientOptions = {
  /**
   * The cluster's controller client (e.g. `cluster.client()` of a `LocalCluster`; it stays the
   * caller's), where to reach the controller (`{ controller: 'host:port', token }`: the client
   * opens that connection and closes it at shutdown), or a cluster to start (`{ platform: 'k8s',
   * namespace }`, `{ platform: 'local' }`: started on first use, stopped at shutdown).
   */
  iris: IrisClient | IrisClientOptions | FrayIrisClusterOptions
  /** Interface the driver's registry listens on; hosts must reach it. @default '127.0.0.1' */
  driverHost?: string
  /**
   * Where actor hosts listen, and the address they give out. @default '127.0.0.1' for both; with `hostListen:
   * '0.0.0.0'` (workers on several hosts) and no `hostAdvertise`, each host gives out the address its iris worker
   * registered by (`IRIS_WORKER_HOST`). Set `driverHost` to an address of the driver's host they can reach.
   */
  hostListen?: string
  hostAdvertise?: string
}

/** Stops every actor and job it started on shutdown; an iris client passed in stays open (it is the caller's). */
export class FrayIrisClient extends ClientBase implements Client {
  readonly backend = 'iris' as const
  private readonly iris: Promise<IrisClient>
  private readonly ownsIris: boolean
  private cluster: Promise<LocalCluster> | undefined

  constructor(private readonly opts: FrayIrisClientOptions) {
    super()
    const o = opts.iris
    this.ownsIris = !(o instanceof IrisClient)
    if (o instanceof IrisClient) this.iris = Promise.resolve(o)
    else if ('platform' in o) {
      this.cluster = startCluster(o)
      this.iris = this.cluster.then((c) => c.client())
    } else this.iris = Promise.resolve(new IrisClient(o))
    // A cluster that fails to start fails the calls that need it, not the process.
    this.iris.catch(() => {})
  }

  override async shutdown(): Promise<void> {
    await super.shutdown()
    if (this.ownsIris) (await this.iris.catch(() => undefined))?.close()
    await (await this.cluster?.catch(() => undefined))?.stop()
  }

  protected startActor(spec: ActorSpec, opts: ActorOptions): ActorConnection {
    const listen = this.opts.hostListen ?? '127.0.0.1'
    const advertise = this.opts.hostAdvertise ?? (['0.0.0.0', '::'].includes(listen) ? undefined : listen)
    const env: Record<string, string> = {
      FRAY_LISTEN_HOST: listen,
      ...(advertise === undefined ? {} : { FRAY_ADVERTISE_HOST: advertise }),
      ...opts.env,
    }
    const spawner = irisSpawner(this.iris, { env })
    this.registry ??= DriverRegistry.start(this.opts.driverHost)
    return new DeferredActor(
      spec.name,
      this.registry.then((reg) => RemoteActor.launch(spec, opts, reg, spawner)),
    )
  }

  protected async startJob(req: JobRequest): Promise<JobHandle> {
    return submitIrisJob(await this.iris, req)
  }
}

async function startCluster(o: FrayIrisClusterOptions): Promise<LocalCluster> {
  if (o.platform === 'local')
    return LocalCluster.start({ ...(o.prefix ? { prefix: o.prefix } : {}), workers: o.workers ?? 1 })
  const { platform: _, prefix, ...k8s } = o
  return LocalCluster.start({ ...(prefix ? { prefix } : {}), kubernetes: await kubernetesPlatform(k8s) })
}
