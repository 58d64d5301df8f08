/**
 * @module `Mesh`: named axes laid over an actor group, with the members linked to each other
 * for collectives. The driver builds it; the members use it from inside their methods
 * through `currentMesh()`.
 *
 * Transport: every member opens a TCP socket on its host (loopback for the local backend)
 * and connects to every other member; collectives send raw float bytes in 1 MiB frames
 * straight between members, never through the driver.
 *
 * @example
 * const group = await client.createActorGroup(Replica, 4, (i) => [i])
 * const mesh = await Mesh.create(group, { data: -1, model: 2 }) // 2×2
 * await group.broadcast.trainStep() // inside: currentMesh().allReduce(grad, { op: 'mean', axis: 'data' })
 */
import { randomUUID } from 'node:crypto'
import { logger } from '@marin/rigging'
import { connectionOf } from './actor.js'
import type { ActorGroup } from './actor-group.js'
import type { MeshJoin } from './actor-runtime.js'
import type { PeerAddress } from './collective/peers.js'
import { coordsOf, type MeshAxes, type MeshAxesInput, resolveAxes } from './mesh-axes.js'

export type MeshOptions = {
  /** Interface the members listen on. @default a hosted actor's FRAY_LISTEN_HOST, else '127.0.0.1' */
  host?: string
}

export class Mesh<T> {
  private constructor(
    readonly id: string,
    readonly group: ActorGroup<T>,
    readonly axes: MeshAxes,
  ) {}

  /** Waits for the group, then links every member to every other. */
  static async create<T>(group: ActorGroup<T>, axes: MeshAxesInput = { data: -1 }, opts: MeshOptions = {}): Promise<Mesh<T>> {
    const resolved = resolveAxes(axes, group.size)
    await group.waitReady()
    const id = randomUUID()
    const conns = group.members.map((m) => connectionOf(m))
    const peers = (await Promise.all(conns.map((c) => c.control('mesh.listen', opts.host === undefined ? { meshId: id } : { meshId: id, host: opts.host })))) as PeerAddress[]
    await Promise.all(conns.map((c, rank) => c.control('mesh.join', { meshId: id, rank, axes: resolved, peers } satisfies MeshJoin)))
    logger('fray').debug({ meshId: id, axes: Object.fromEntries(resolved) }, 'mesh linked')
    return new Mesh(id, group, resolved)
  }

  get size(): number {
    return this.group.size
  }

  /** Axis sizes by name. @example { data: 2, model: 2 } */
  shape(): Record<string, number> {
    return Object.fromEntries(this.axes)
  }

  /** Member `rank`'s coordinates. */
  coords(rank: number): Record<string, number> {
    const c = coordsOf(this.axes, rank)
    return Object.fromEntries(this.axes.map(([n], i) => [n, c[i]!]))
  }

  /** Unlinks the members (the actors keep running). */
  async close(): Promise<void> {
    await Promise.all(this.group.members.map((m) => connectionOf(m).control('mesh.leave', { meshId: this.id }).catch(() => {})))
  }
}
