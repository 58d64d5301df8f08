/**
 * @module `Mesh`: named axes laid over an actor group, with the members linked to each other
 * for collectives. The driver builds it; the members use it from inside their methods
 * through `currentMesh()`.
 *
 * Transport: every member opens a TCP socket (and a Unix socket) on its host and connects to
 * every other member; collectives send raw float bytes in 1 MiB frames straight between
 * members, never through the driver.
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
import type { MeshJoin, MeshListen } from './actor-runtime.js'
import type { PeerAddress } from './collective/peers.js'
import { coordsByName, type MeshAxes, type MeshAxesInput, resolveAxes } from './mesh-axes.js'

const log = logger('fray')

export type MeshOptions = {
  /** Interface the members listen on. @default a hosted actor's FRAY_LISTEN_HOST, else '127.0.0.1' */
  host?: string
}

export class Mesh<T> {
  /** Bumped on every relink, so that a slower, older one gives way. */
  private epoch = 0
  private unwatch: (() => void)[] = []

  private constructor(
    readonly id: string,
    readonly group: ActorGroup<T>,
    readonly axes: MeshAxes,
    private readonly host: string | undefined,
  ) {}

  /**
   * Waits for the group, then links every member to every other. A member that restarts
   * (`maxRestarts`) is linked in again: every member gets new links, and collectives called
   * meanwhile wait for them.
   */
  static async create<T>(
    group: ActorGroup<T>,
    axes: MeshAxesInput = { data: -1 },
    opts: MeshOptions = {},
  ): Promise<Mesh<T>> {
    const resolved = resolveAxes(axes, group.size)
    await group.waitReady()
    const mesh = new Mesh(randomUUID(), group, resolved, opts.host)
    try {
      await mesh.link(0)
    } catch (err) {
      await mesh.close()
      throw err
    }
    mesh.unwatch = group.members.map((m, rank) => connectionOf(m).onRestart?.(() => mesh.relink(rank)) ?? (() => {}))
    log.debug({ meshId: mesh.id, axes: Object.fromEntries(resolved) }, 'mesh linked')
    return mesh
  }

  /** Every member opens new sockets, then connects to every other. */
  private async link(epoch: number, restarted?: number): Promise<void> {
    const conns = this.group.members.map((m) => connectionOf(m))
    const listen = (rank: number): MeshListen => ({
      meshId: this.id,
      rank,
      axes: this.axes,
      epoch,
      ...(this.host === undefined ? {} : { host: this.host }),
      ...(restarted === undefined ? {} : { restarted }),
    })
    const peers = (await Promise.all(conns.map((c, rank) => c.control('mesh.listen', listen(rank))))) as PeerAddress[]
    if (epoch !== this.epoch) return
    await Promise.all(
      conns.map((c, rank) =>
        c.control('mesh.join', { meshId: this.id, rank, axes: this.axes, peers, epoch } satisfies MeshJoin),
      ),
    )
  }

  /** Member `rank` restarted: called before its death reaches anyone, so these requests go first. */
  private relink(rank: number): void {
    const epoch = ++this.epoch
    const name = this.group.members[rank]!.$actor.name
    log.info({ meshId: this.id, member: rank, actor: name }, 'mesh member restarted: relinking')
    this.link(epoch, rank).catch((err: Error) => {
      if (epoch !== this.epoch) return
      const message =
        `mesh member ${rank} (actor ${name}) restarted but could not ` +
        `rejoin the mesh: ${err.message}; create the mesh again with Mesh.create`
      log.warn({ meshId: this.id, member: rank, err }, 'mesh relink failed')
      for (const m of this.group.members)
        connectionOf(m)
          .control('mesh.broken', { meshId: this.id, message })
          .catch(() => {})
    })
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
    return coordsByName(this.shape(), rank)
  }

  /**
   * `rank`'s coordinates on a mesh of `shape` (fixed sizes, the last axis fastest), without a mesh
   * of actors: for code that lays data out by rank before (or without) creating one.
   * @example Mesh.coordsOf({ data: 2, model: 2 }, 3) // { data: 1, model: 1 }
   */
  static coordsOf(shape: Readonly<Record<string, number>>, rank: number): Record<string, number> {
    return coordsByName(shape, rank)
  }

  /** Unlinks the members (the actors keep running). */
  async close(): Promise<void> {
    for (const off of this.unwatch) off()
    this.unwatch = []
    this.epoch++
    await Promise.all(
      this.group.members.map((m) =>
        connectionOf(m)
          .control('mesh.leave', { meshId: this.id })
          .catch(() => {}),
      ),
    )
  }
}
