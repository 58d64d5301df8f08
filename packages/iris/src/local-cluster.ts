/**
 * @module `LocalCluster`: a controller and one or more workers in this process,
 * on a prefix directory. The controller serves gRPC on loopback so that the
 * `iris` CLI and other processes can use the cluster too; it is private: calls
 * need the cluster token, kept in `<prefix>/iris/token` (mode 0600, in a 0700
 * directory), where the CLI of the same account finds it.
 */
import { chmodSync, mkdirSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { MARIN_LAYOUT } from '@marin/rigging'
import { IrisClient } from './client.js'
import { inProcessLink } from './controller-link.js'
import { startController, type ControllerServer } from './controller-server.js'
import { ensureTokenFile, localTokenPath } from './credentials.js'
import type { KubePodsOptions } from './kube-pod-spec.js'
import type { Resources } from './resources.js'
import { Worker, type MountMaterializer } from './worker.js'

export type LocalClusterOptions = {
  /** Where state (`iris/iris.sqlite`) and task directories (`iris/work/`) live. @default a new temp directory */
  prefix?: string
  /** Workers to start. @default 1 */
  workers?: number
  /** Resources of each worker. @default the whole machine */
  resources?: Resources
  /** Port of the controller's gRPC server. @default 0 (a free port) */
  port?: number
  /** Interface the controller listens on. @default '127.0.0.1' */
  host?: string
  /** The cluster token. @default the one in `<prefix>/iris/token`, made (0600) if there is none */
  token?: string
  /** @default 1000 */
  heartbeatMs?: number
  /** @default 10000 */
  workerTimeoutMs?: number
  /** @default 5000 */
  killGraceMs?: number
  /** @default a day */
  cleanupTtlMs?: number
  /** Materializes `--mount` artifacts (see `finestoreMounts`). */
  materialize?: MountMaterializer
  /** Run the tasks of jobs that name a `runner` in warm runners. @default true */
  warmRunners?: boolean
  /**
   * Run tasks as Kubernetes Pods instead of processes here: one worker, `k8s-<namespace>`, offering `resources`
   * (@default cpu=1000, memory=4Ti, gpu=64: the cluster's quota and scheduler decide what runs). Tasks reach the
   * controller at `advertise`.
   */
  kubernetes?: Omit<KubePodsOptions, 'platformId'> & { advertise?: string; platformId?: string }
}

export class LocalCluster {
  private constructor(
    readonly prefix: string,
    readonly server: ControllerServer,
    readonly workers: readonly Worker[],
    private readonly token: string,
  ) {}

  /** `host:port` of the controller. */
  get address(): string {
    return this.server.address
  }

  /**
   * Starts the controller and its workers.
   * @example
   * const cluster = await LocalCluster.start({ workers: 2 })
   * const iris = cluster.client()
   */
  static async start(opts: LocalClusterOptions = {}): Promise<LocalCluster> {
    const prefix = resolve(opts.prefix ?? mkdtempSync(join(tmpdir(), 'iris-local-')))
    const irisDir = join(prefix, MARIN_LAYOUT.iris)
    mkdirSync(irisDir, { recursive: true, mode: 0o700 })
    // State, task directories and the token: this account's only.
    chmodSync(irisDir, 0o700)
    const token = opts.token ?? ensureTokenFile(localTokenPath(prefix))
    const server = await startController({
      statePath: join(prefix, MARIN_LAYOUT.irisState),
      port: opts.port ?? 0,
      ...(opts.host ? { host: opts.host } : {}),
      heartbeatMs: opts.heartbeatMs ?? 1000,
      workerTimeoutMs: opts.workerTimeoutMs ?? 10_000,
      token,
    })
    const workers: Worker[] = []
    try {
      const k = opts.kubernetes
      if (k) {
        // Loaded only for this platform: the Kubernetes client library is large.
        const { KubePods } = await import('./kube-pods.js')
        const workerId = `k8s-${k.namespace}`
        const w = new Worker({
          link: inProcessLink(server.controller),
          controllerAddress: k.advertise ?? server.address,
          workDir: join(prefix, MARIN_LAYOUT.irisWork, workerId),
          workerId,
          retryDelayMs: 100,
          killGraceMs: opts.killGraceMs ?? 5000,
          resources: opts.resources ?? { cpu: 1000, memory: 4 * 2 ** 40, gpu: 64 },
          warmRunners: false,
          pods: new KubePods({ ...k, platformId: k.platformId ?? workerId }),
        })
        await w.start()
        workers.push(w)
      }
      for (let i = 0; i < (k ? 0 : (opts.workers ?? 1)); i++) {
        const workerId = `local-${i}`
        const w = new Worker({
          link: inProcessLink(server.controller),
          controllerAddress: server.address,
          workDir: join(prefix, MARIN_LAYOUT.irisWork, workerId),
          workerId,
          retryDelayMs: 100,
          killGraceMs: opts.killGraceMs ?? 5000,
          ...(opts.resources ? { resources: opts.resources } : {}),
          ...(opts.cleanupTtlMs !== undefined ? { cleanupTtlMs: opts.cleanupTtlMs } : {}),
          ...(opts.materialize ? { materialize: opts.materialize } : {}),
          ...(opts.warmRunners !== undefined ? { warmRunners: opts.warmRunners } : {}),
        })
        await w.start()
        workers.push(w)
      }
    } catch (err) {
      await Promise.all(workers.map((w) => w.stop()))
      await server.close()
      throw err
    }
    return new LocalCluster(prefix, server, workers, token)
  }

  /** Where the cluster token is, when it came from the prefix (`<prefix>/iris/token`). */
  get tokenFile(): string {
    return localTokenPath(this.prefix)
  }

  /** A gRPC client of this cluster's controller, with the cluster token. */
  client(): IrisClient {
    return new IrisClient({ controller: this.address, token: this.token })
  }

  /**
   * Kills running tasks, stops the workers and the controller. State stays in the prefix. With `keepPods`, task
   * Pods of the k8s platform are left running for the next start on this prefix to adopt (`iris cluster start
   * --platform k8s` stopped for an upgrade).
   */
  async stop(opts: { keepPods?: boolean } = {}): Promise<void> {
    await Promise.all(this.workers.map((w) => w.stop({ killTasks: !(opts.keepPods && w.runsPods) })))
    await this.server.close()
  }
}
