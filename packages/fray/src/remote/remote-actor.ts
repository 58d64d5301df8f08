/**
 * @module An actor in a host process reached over ducky (gRPC): the iris backend's transport,
 * also usable locally (`LocalClient({ mode: 'grpc' })`). Death is noticed two ways, whichever
 * comes first: the host's liveness stream breaks, or the backend reports the process gone.
 */
import { connect, type DuckyClient } from '@marin/ducky'
import { logger } from '@marin/rigging'
import type { CallOptions } from '../actor.js'
import type { ActorOptions } from '../actor-options.js'
import type { ActorSpec } from '../actor-runtime.js'
import { ActorDiedError, FrayError } from '../errors.js'
import { ActorBase } from '../internal/actor-base.js'
import { actorDeaths, actorRestarts } from '../internal/telemetry.js'
import { errorFromPayload } from '../internal/wire.js'
import { resources } from '../resources.js'
import type { DriverRegistry } from './registry.js'
import { ActorService } from './services.js'
import type { HostExit, SpawnedHost, Spawner } from './spawner.js'

const log = logger('fray')
const DAY_MS = 24 * 3600 * 1000

export class RemoteActor extends ActorBase {
  private client: DuckyClient<typeof ActorService> | null = null
  private host: SpawnedHost | null = null
  private hostPid: number | undefined
  private stopping = false
  private generation = 0

  private constructor(
    spec: ActorSpec,
    opts: ActorOptions,
    private readonly registry: DriverRegistry,
    private readonly spawner: Spawner,
  ) {
    super(spec, opts)
    this.begin(() => this.start())
  }

  static launch(spec: ActorSpec, opts: ActorOptions, registry: DriverRegistry, spawner: Spawner): RemoteActor {
    return new RemoteActor(spec, opts, registry, spawner)
  }

  private async start(): Promise<void> {
    const gen = ++this.generation
    const expected = this.registry.expect(this.spec)
    const host = this.spawner.spawn(
      this.name,
      { FRAY_DRIVER_ADDRESS: this.registry.address, FRAY_ACTOR_NAME: this.name },
      resources(this.opts.resources),
    )
    this.host = host
    const timeoutMs = this.opts.startTimeoutMs ?? 60_000
    let timer: NodeJS.Timeout | undefined
    const failed = new Promise<never>((_, rej) => {
      timer = setTimeout(() => {
        host.kill('SIGKILL')
        rej(
          new FrayError(
            'ACTOR_START_FAILED',
            `actor ${this.name} was not ready within ${timeoutMs} ms; raise ` +
              `startTimeoutMs or check its host's logs`,
          ),
        )
      }, timeoutMs)
      host.exited.then((e) =>
        rej(
          new FrayError(
            'ACTOR_START_FAILED',
            `actor ${this.name}: its host exited (${describe(e)}) before the actor was ready; see its logs`,
          ),
        ),
      )
    })
    try {
      const reg = await Promise.race([expected.registered, failed])
      this.hostPid = reg.pid
      const client = connect(ActorService, reg.address, { deadlineMs: DAY_MS })
      this.client = client
      const error = await Promise.race([expected.ready, failed])
      if (error) throw new FrayError('ACTOR_START_FAILED', error.message)
      // The liveness stream: its end means the host is gone.
      const watch = client.watch({})
      void (async () => {
        try {
          for await (const _ of watch) {
            /* the first message is the pid; then it stays open */
          }
        } catch {
          /* broken: the host is gone */
        }
        const exit = await Promise.race([
          host.exited,
          new Promise<HostExit>((r) => setTimeout(() => r({ code: null, signal: null }), 10_000)),
        ])
        this.onDeath(gen, exit)
      })()
      host.exited.then((e) => this.onDeath(gen, e))
      this.state = 'ready'
    } finally {
      clearTimeout(timer)
    }
  }

  private onDeath(gen: number, exit: HostExit): void {
    if (gen !== this.generation) return
    this.generation++
    this.client?.close()
    this.client = null
    this.hostPid = undefined
    const died = new ActorDiedError(this.name, exit.code, exit.signal)
    if (!this.stopping)
      log.warn(
        { actor: this.name, exitCode: exit.code, signal: exit.signal, pendingCalls: this.pending.size },
        'hosted actor died',
      )
    if (this.stopping) {
      this.pending.rejectAll(died)
      this.state = 'stopped'
      return
    }
    actorDeaths.inc()
    if (this.afterDeath(died, () => this.start())) actorRestarts.inc()
  }

  call(method: string, args: unknown[], opts: CallOptions): Promise<unknown> {
    return this.request(method, (c) => c.call({ method, args }), opts.timeoutMs ?? this.opts.callTimeoutMs)
  }

  control(op: string, arg: unknown): Promise<unknown> {
    return this.request(op, (c) => c.control({ op, arg }), undefined)
  }

  private request(
    what: string,
    send: (
      c: DuckyClient<typeof ActorService>,
    ) => Promise<{ value?: unknown; error?: { name: string; message: string; stack?: string; code?: string } }>,
    timeoutMs: number | undefined,
  ): Promise<unknown> {
    return this.gate(() => {
      const client = this.client
      if (!client) return null
      const { id, promise } = this.pending.add(this.name, what, timeoutMs)
      send(client).then(
        (r) =>
          r.error
            ? this.pending.reject(id, errorFromPayload(this.name, what, r.error))
            : this.pending.resolve(id, r.value),
        // A transport failure is the host dying: the death handler rejects with ActorDiedError.
        // Anything else (the host alive but the call refused) is reported as it is.
        (err: Error) =>
          setTimeout(
            () =>
              this.pending.reject(
                id,
                new FrayError('ACTOR_METHOD_FAILED', `actor ${this.name}.${what}: ${err.message}`, { cause: err }),
              ),
            2_500,
          ),
      )
      return promise
    })
  }

  pid(): number | undefined {
    return this.hostPid
  }

  kill(signal: NodeJS.Signals = 'SIGKILL'): void {
    this.host?.kill(signal)
  }

  async stop(): Promise<void> {
    this.stopping = true
    this.registry.forget(this.name)
    const host = this.host
    if (!host || this.state === 'dead' || this.state === 'stopped') {
      if (this.state !== 'dead') this.state = 'stopped'
      return
    }
    const force = setTimeout(() => host.kill('SIGKILL'), 5_000)
    await this.client?.stop({}).catch(() => host.kill('SIGKILL'))
    await host.exited
    clearTimeout(force)
    this.state = 'stopped'
  }
}

function describe(e: HostExit): string {
  const how = e.signal ? `signal ${e.signal}` : `code ${e.code}`
  return e.error ? `${how}: ${e.error}` : how
}
