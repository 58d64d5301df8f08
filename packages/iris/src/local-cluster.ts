/**
 * @module `LocalCluster`: a controller and one or more workers in this process,
 * on a prefix directory. The controller serves gRPC on loopback so that the
 * `iris` CLI and other processes can use the cluster too.
 */
import { mkdirSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { IrisClient } from './client.js'
import { inProcessLink } from './controller-link.js'
import { startController, type ControllerServer } from './controller-server.js'
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
}

export class LocalCluster {
  private constructor(
    readonly prefix: string,
    readonly server: ControllerServer,
    readonly workers: readonly Worker[],
    private readonly token: string | undefined,
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
    mkdirSync(join(prefix, 'iris'), { recursive: true })
    const server = await startController({
      statePath: join(prefix, 'iris', 'iris.sqlite'),
      port: opts.port ?? 0,
      heartbeatMs: opts.heartbeatMs ?? 1000,
      workerTimeoutMs: opts.workerTimeoutMs ?? 10_000,
      ...(opts.token ? { token: opts.token } : {}),
    })
    const workers: Worker[] = []
    try {
      for (let i = 0; i < (opts.workers ?? 1); i++) {
        const workerId = `local-${i}`
        const w = new Worker({
          link: inProcessLink(server.controller),
          controllerAddress: server.address,
          workDir: join(prefix, 'iris', 'work', workerId),
          workerId,
          retryDelayMs: 100,
          killGraceMs: opts.killGraceMs ?? 5000,
          ...(opts.resources ? { resources: opts.resources } : {}),
          ...(opts.cleanupTtlMs !== undefined ? { cleanupTtlMs: opts.cleanupTtlMs } : {}),
          ...(opts.materialize ? { materialize: opts.materialize } : {}),
          ...(opts.token ? { extraEnv: { IRIS_TOKEN: opts.token } } : {}),
        })
        await w.start()
        workers.push(w)
      }
    } catch (err) {
      await Promise.all(workers.map((w) => w.stop()))
      await server.close()
      throw err
    }
    return new LocalCluster(prefix, server, workers, opts.token)
  }

  /** A gRPC client of this cluster's controller. */
  client(): IrisClient {
    return new IrisClient({ controller: this.address, ...(this.token ? { token: this.token } : {}) })
  }

  /** Kills running tasks, stops the workers and the controller. State stays in the prefix. */
  async stop(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.stop({ killTasks: true })))
    await this.server.close()
  }
}
