/**
 * @module The side of an actor that holds the instance: loads its class from the module URL,
 * constructs it, runs method calls in the actor's context, and answers fray's control requests
 * (mesh wiring). Used inside worker processes and, in inline mode, in the driver's process.
 */
import type { ActorClassRef } from './actor.js'
import { Peers, type PeerAddress } from './collective/peers.js'
import { type ActorContext, runAsActor } from './context.js'
import { FrayError } from './errors.js'
import type { MeshAxes } from './mesh-axes.js'
import { MeshMember } from './mesh-member.js'

/** Everything needed to build an actor somewhere else: plain data. */
export type ActorSpec = {
  readonly name: string
  readonly cls: ActorClassRef
  readonly args: readonly unknown[]
  readonly index: number
  readonly groupSize: number
}

/** Opens a member's links; `epoch` counts relinks of the same mesh (0 when it is created). */
export type MeshListen = {
  meshId: string
  rank: number
  axes: MeshAxes
  epoch: number
  host?: string
  restarted?: number
}
export type MeshJoin = { meshId: string; rank: number; axes: MeshAxes; peers: PeerAddress[]; epoch: number }

const OBJECT_METHODS = new Set(Object.getOwnPropertyNames(Object.prototype))

export class ActorRuntime {
  private readonly meshes = new Map<string, MeshMember>()
  private readonly pendingPeers = new Map<string, { peers: Peers; epoch: number }>()
  private lastMesh: string | null = null
  private instance!: Record<string, unknown>
  readonly ctx: ActorContext

  private constructor(readonly spec: ActorSpec) {
    this.ctx = {
      name: spec.name,
      index: spec.index,
      groupSize: spec.groupSize,
      mesh: (id?: string) => {
        const key = id ?? this.lastMesh
        const m = key === null ? undefined : this.meshes.get(key)
        if (!m)
          throw new FrayError(
            'NOT_IN_MESH',
            `actor ${spec.name} is in no mesh${id ? ` with id ${id}` : ''}; ` +
              `create one on the driver with Mesh.create(group, axes)`,
          )
        return m
      },
    }
  }

  /** Imports the class and constructs the instance inside the actor's context. */
  static async create(spec: ActorSpec): Promise<ActorRuntime> {
    const rt = new ActorRuntime(spec)
    let mod: Record<string, unknown>
    try {
      mod = (await import(spec.cls.module)) as Record<string, unknown>
    } catch (err) {
      throw new FrayError(
        'ACTOR_START_FAILED',
        `actor ${spec.name}: cannot import ${spec.cls.module}: ${(err as Error).message}`,
        { cause: err },
      )
    }
    const Cls = mod[spec.cls.export]
    if (typeof Cls !== 'function') {
      throw new FrayError(
        'ACTOR_START_FAILED',
        `actor ${spec.name}: ${spec.cls.module} has no exported class "` +
          `${spec.cls.export}"; exports are [${Object.keys(mod).join(', ')}]`,
      )
    }
    try {
      rt.instance = runAsActor(
        rt.ctx,
        () => new (Cls as new (...a: unknown[]) => Record<string, unknown>)(...spec.args),
      )
    } catch (err) {
      throw new FrayError(
        'ACTOR_START_FAILED',
        `actor ${spec.name}: constructor of ${spec.cls.export} threw: ${(err as Error).message}`,
        { cause: err },
      )
    }
    return rt
  }

  /** Runs one method; its errors propagate as they are (the transport wraps them). */
  call(method: string, args: readonly unknown[]): Promise<unknown> {
    const fn = this.instance[method]
    if (typeof fn !== 'function' || method === 'constructor' || OBJECT_METHODS.has(method)) {
      return Promise.reject(
        new FrayError(
          'ACTOR_NO_SUCH_METHOD',
          `actor ${this.spec.name} (${this.spec.cls.export}) has no method "${method}"`,
        ),
      )
    }
    return runAsActor(this.ctx, async () => fn.apply(this.instance, args))
  }

  /**
   * Fray's own requests: `mesh.listen` opens a member's sockets, `mesh.join` links it to the
   * others (both again when a member restarted), `mesh.broken` says the links cannot come back.
   */
  async control(op: string, arg: unknown): Promise<unknown> {
    switch (op) {
      case 'mesh.listen': {
        const { meshId, host, rank, axes, epoch, restarted } = arg as MeshListen
        // Relinking after a member restarted: collectives wait for the new links from here on.
        const member = this.meshes.get(meshId)
        if (member)
          member.unlink(
            new FrayError(
              'COLLECTIVE_PEER_LOST',
              `mesh member ${restarted ?? '?'} died and restarted; member ` +
                `${rank} is relinking to it: call the collective again`,
            ),
          )
        else {
          this.meshes.set(meshId, new MeshMember(meshId, rank, axes, null))
          this.lastMesh = meshId
        }
        this.pendingPeers.get(meshId)?.peers.close()
        // A hosted actor listens where its host was told to and gives out the address others can reach.
        const peers = await Peers.listen(host ?? process.env.FRAY_LISTEN_HOST)
        this.pendingPeers.set(meshId, { peers, epoch })
        const addr = peers.address()
        return host === undefined && process.env.FRAY_ADVERTISE_HOST
          ? { ...addr, host: process.env.FRAY_ADVERTISE_HOST }
          : addr
      }
      case 'mesh.join': {
        const j = arg as MeshJoin
        const pending = this.pendingPeers.get(j.meshId)
        if (!pending || pending.epoch !== j.epoch)
          throw new FrayError(
            'NOT_IN_MESH',
            `actor ${this.spec.name}: mesh ${j.meshId} (link ${j.epoch}) was not opened here`,
          )
        this.pendingPeers.delete(j.meshId)
        await pending.peers.connect(j.rank, j.peers)
        let member = this.meshes.get(j.meshId)
        if (!member) this.meshes.set(j.meshId, (member = new MeshMember(j.meshId, j.rank, j.axes, null)))
        member.relink(pending.peers)
        this.lastMesh = j.meshId
        return null
      }
      case 'mesh.broken': {
        const { meshId, message } = arg as { meshId: string; message: string }
        this.meshes.get(meshId)?.fail(new FrayError('COLLECTIVE_PEER_LOST', message))
        return null
      }
      case 'mesh.leave': {
        const { meshId } = arg as { meshId: string }
        this.meshes.get(meshId)?.close()
        this.meshes.delete(meshId)
        this.pendingPeers.get(meshId)?.peers.close()
        this.pendingPeers.delete(meshId)
        if (this.lastMesh === meshId) this.lastMesh = null
        return null
      }
      default:
        throw new FrayError('ACTOR_NO_SUCH_METHOD', `actor ${this.spec.name}: unknown control request "${op}"`)
    }
  }

  /** Leaves every mesh and lets the instance clean up (`close()` if it has one). */
  async close(): Promise<void> {
    for (const m of this.meshes.values()) m.close()
    for (const p of this.pendingPeers.values()) p.peers.close()
    this.meshes.clear()
    const close = this.instance?.close
    if (typeof close === 'function') await runAsActor(this.ctx, async () => close.call(this.instance))
  }
}
