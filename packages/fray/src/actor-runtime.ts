/**
 * @module The side of an actor that holds the instance: loads its class from the module URL,
 * constructs it, runs method calls in the actor's context, and answers fray's control requests
 * (mesh wiring). Used inside worker processes and, in inline mode, in the driver's process.
 */
import type { ActorClassRef } from './actor.js'
import { Peers, type PeerAddress } from './collective/peers.js'
import { type ActorContext, runAsActor } from './context.js'
import { FrayError } from './errors.js'
import { type MeshAxes } from './mesh-axes.js'
import { MeshMember } from './mesh-member.js'

/** Everything needed to build an actor somewhere else: plain data. */
export type ActorSpec = {
  readonly name: string
  readonly cls: ActorClassRef
  readonly args: readonly unknown[]
  readonly index: number
  readonly groupSize: number
}

export type MeshJoin = { meshId: string; rank: number; axes: MeshAxes; peers: PeerAddress[] }

const OBJECT_METHODS = new Set(Object.getOwnPropertyNames(Object.prototype))

export class ActorRuntime {
  private readonly meshes = new Map<string, MeshMember>()
  private readonly pendingPeers = new Map<string, Peers>()
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
        if (!m) throw new FrayError('NOT_IN_MESH', `actor ${spec.name} is in no mesh${id ? ` with id ${id}` : ''}; create one on the driver with Mesh.create(group, axes)`)
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
      throw new FrayError('ACTOR_START_FAILED', `actor ${spec.name}: cannot import ${spec.cls.module}: ${(err as Error).message}`, { cause: err })
    }
    const Cls = mod[spec.cls.export]
    if (typeof Cls !== 'function') {
      throw new FrayError('ACTOR_START_FAILED', `actor ${spec.name}: ${spec.cls.module} has no exported class "${spec.cls.export}"; exports are [${Object.keys(mod).join(', ')}]`)
    }
    try {
      rt.instance = runAsActor(rt.ctx, () => new (Cls as new (...a: unknown[]) => Record<string, unknown>)(...spec.args))
    } catch (err) {
      throw new FrayError('ACTOR_START_FAILED', `actor ${spec.name}: constructor of ${spec.cls.export} threw: ${(err as Error).message}`, { cause: err })
    }
    return rt
  }

  /** Runs one method; its errors propagate as they are (the transport wraps them). */
  call(method: string, args: readonly unknown[]): Promise<unknown> {
    const fn = this.instance[method]
    if (typeof fn !== 'function' || method === 'constructor' || OBJECT_METHODS.has(method)) {
      return Promise.reject(new FrayError('ACTOR_NO_SUCH_METHOD', `actor ${this.spec.name} (${this.spec.cls.export}) has no method "${method}"`))
    }
    return runAsActor(this.ctx, async () => fn.apply(this.instance, args))
  }

  /** Fray's own requests: `mesh.listen` opens a member's socket, `mesh.join` links it to the others. */
  async control(op: string, arg: unknown): Promise<unknown> {
    switch (op) {
      case 'mesh.listen': {
        const { meshId, host } = arg as { meshId: string; host?: string }
        // A hosted actor listens where its host was told to and gives out the address others can reach.
        const peers = await Peers.listen(host ?? process.env['FRAY_LISTEN_HOST'])
        this.pendingPeers.set(meshId, peers)
        const addr = peers.address()
        return host === undefined && process.env['FRAY_ADVERTISE_HOST'] ? { ...addr, host: process.env['FRAY_ADVERTISE_HOST'] } : addr
      }
      case 'mesh.join': {
        const j = arg as MeshJoin
        const peers = this.pendingPeers.get(j.meshId)
        if (!peers) throw new FrayError('NOT_IN_MESH', `actor ${this.spec.name}: mesh ${j.meshId} was not opened here`)
        this.pendingPeers.delete(j.meshId)
        await peers.connect(j.rank, j.peers)
        this.meshes.set(j.meshId, new MeshMember(j.meshId, j.rank, j.axes, peers))
        this.lastMesh = j.meshId
        return null
      }
      case 'mesh.leave': {
        const { meshId } = arg as { meshId: string }
        this.meshes.get(meshId)?.close()
        this.meshes.delete(meshId)
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
    for (const p of this.pendingPeers.values()) p.close()
    this.meshes.clear()
    const close = this.instance?.['close']
    if (typeof close === 'function') await runAsActor(this.ctx, async () => close.call(this.instance))
  }
}
