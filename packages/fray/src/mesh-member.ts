/**
 * @module A mesh as one member sees it, inside an actor: its rank and coordinates, and
 * the collectives (`allReduce`, `broadcast`, `barrier`) over all axes or some of them.
 * Every member must call the same collectives in the same order (SPMD).
 */
import { allReduce, type ReduceOp } from './collective/all-reduce.js'
import { barrier, broadcast } from './collective/broadcast.js'
import type { Comm } from './collective/comm.js'
import type { Peers } from './collective/peers.js'
import { ScratchPool } from './collective/scratch.js'
import { coordsOf, type MeshAxes, subgroup } from './mesh-axes.js'

/** Which axes a collective runs over. @default all of them */
export type AxisSelector = { axis?: string | readonly string[] }

export type AllReduceOptions = AxisSelector & {
  /** @default 'sum' */
  op?: ReduceOp
  /** Bytes per frame. @default 1 MiB */
  chunkBytes?: number
  /** Where the result goes (same length as the input; may be the input itself, for in place). @default a new array */
  out?: Float32Array
}

export type BroadcastOptions = AxisSelector & {
  /** Position of the sending member within the sub-group (its coordinate, for one axis). @default 0 */
  root?: number
}

export class MeshMember {
  private readonly comms = new Map<string, Comm>()
  private readonly scratch = new ScratchPool()

  constructor(
    readonly meshId: string,
    readonly rank: number,
    readonly axes: MeshAxes,
    private readonly peers: Peers,
  ) {}

  get size(): number {
    return this.axes.reduce((p, [, s]) => p * s, 1)
  }

  /** This member's coordinate on each axis. @example { data: 1, model: 0 } */
  coords(): Record<string, number> {
    const c = coordsOf(this.axes, this.rank)
    return Object.fromEntries(this.axes.map(([n], i) => [n, c[i]!]))
  }

  axisSize(name: string): number {
    return subgroup(this.axes, this.rank, [name]).ranks.length
  }

  private comm(sel: AxisSelector): Comm {
    const over = sel.axis === undefined ? this.axes.map(([n]) => n) : typeof sel.axis === 'string' ? [sel.axis] : [...sel.axis]
    const key = [...over].sort().join(',')
    let c = this.comms.get(key)
    if (!c) {
      const g = subgroup(this.axes, this.rank, over)
      c = { peers: this.peers, ranks: g.ranks, me: g.ranks.indexOf(this.rank), id: g.id, seq: 0, scratch: this.scratch }
      this.comms.set(key, c)
    }
    return c
  }

  /**
   * Reduces `data` over the selected axes; every member of each sub-group gets the identical result.
   * @example const g = await currentMesh().allReduce(grad, { op: 'mean', axis: 'data' })
   */
  allReduce(data: Float32Array, opts: AllReduceOptions = {}): Promise<Float32Array> {
    return allReduce(this.comm(opts), data, opts.op ?? 'sum', opts.chunkBytes, opts.out)
  }

  /** Overwrites `buf` on every member with the root's bytes; all members pass the same byte length. */
  broadcast<T extends ArrayBufferView>(buf: T, opts: BroadcastOptions = {}): Promise<T> {
    return broadcast(this.comm(opts), buf, opts.root ?? 0)
  }

  /** Resolves when every member of the sub-group has reached it. */
  barrier(opts: AxisSelector = {}): Promise<void> {
    return barrier(this.comm(opts))
  }

  close(): void {
    this.peers.close()
  }
}
