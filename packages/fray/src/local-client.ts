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
import type { ActorConnection } from './actor.js'
import type { ActorOptions } from './actor-options.js'
import type { ActorSpec } from './actor-runtime.js'
import type { Client } from './client.js'
import { InlineActor } from './inline-actor.js'
import { ClientBase, nextId } from './internal/client-base.js'
import type { JobHandle, JobRequest } from './job.js'
import { LocalJob } from './local-job.js'
import { ProcessActor } from './process-actor.js'
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

export class LocalClient extends ClientBase implements Client {
  readonly backend: 'process' | 'inline' | 'grpc'

  constructor(opts: LocalClientOptions = {}) {
    super()
    this.backend = opts.mode ?? 'process'
  }

  protected startActor(spec: ActorSpec, opts: ActorOptions): ActorConnection {
    if (this.backend === 'inline') return InlineActor.launch(spec, opts)
    if (this.backend === 'process') return ProcessActor.launch(spec, opts)
    this.registry ??= DriverRegistry.start()
    return new DeferredActor(
      spec.name,
      this.registry.then((reg) => RemoteActor.launch(spec, opts, reg, localSpawner)),
    )
  }

  protected async startJob(req: JobRequest): Promise<JobHandle> {
    return new LocalJob(`${req.name}-${nextId()}`, req)
  }
}
