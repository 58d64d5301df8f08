/**
 * @module A mesh as one member sees it, inside an actor: its rank and coordinates, and
 * the collectives (`allReduce`, `reduceScatter`, `allGather`, `broadcast`, `barrier`) over all
 * axes or some of them.
 * Every member must call the same collectives in the same order (SPMD).
 *
 * When a member restarts, the driver relinks the whole mesh: every member gets new links and
 * starts counting collectives afresh. Meanwhile collectives wait for the new links.
 */
import { allGather } from './collective/all-gather.js'
import { allReduce } from './collective/all-reduce.js'
import { type ReduceOp, reduceScatter } from './collective/reduce-scatter.js'
import { barrier, broadcast } from './collective/broadcast.js'
import type { Comm } from './collective/comm.js'
import type { Peers } from './collective/peers.js'
import { ScratchPool } from './collective/scratch.js'
import { FrayError } from './errors.js'
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

export type ReduceScatterOptions = AxisSelector & {
  /** @default 'sum' */
  op?: ReduceOp
  /** Bytes per frame. @default 1 MiB */
  chunkBytes?: number
  /**
   * Where this member's shard goes (the shard's length; may be that range of the input, for in place).
   * @default a new array
   */
  out?: Float32Array
}

export type AllGatherOptions = AxisSelector & {
  /** Bytes per frame. @default 1 MiB */
  chunkBytes?: number
  /**
   * Where the result goes (the shards' total length; may hold this member's shard at its offset).
   * @default a new array
   */
  out?: Float32Array
}

export type BroadcastOptions = AxisSelector & {
  /** Position of the sending member within the sub-group (its coordinate, for one axis). @default 0 */
  root?: number
}

export class MeshMember {
  private comms = new Map<string, Comm>()
  private readonly scratch = new ScratchPool()
  private peers: Peers | null
  /** While relinking: settles when the new links are up (or can never be). */
  private linked: Promise<void> = Promise.resolve()
  private settleLink: { resolve: () => void; reject: (e: Error) => void } | null = null
  private closed = false

  /** `peers` null: links are on their way (`relink`). */
  constructor(
    readonly meshId: string,
    readonly rank: number,
    readonly axes: MeshAxes,
    peers: Peers | null,
  ) {
    this.peers = peers
    if (!peers) this.unlink()
  }

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

  private comm(peers: Peers, sel: AxisSelector): Comm {
    const over =
      sel.axis === undefined ? this.axes.map(([n]) => n) : typeof sel.axis === 'string' ? [sel.axis] : [...sel.axis]
    const key = [...over].sort().join(',')
    let c = this.comms.get(key)
    if (!c) {
      const g = subgroup(this.axes, this.rank, over)
      c = { peers, ranks: g.ranks, me: g.ranks.indexOf(this.rank), id: g.id, seq: 0, scratch: this.scratch }
      this.comms.set(key, c)
    }
    return c
  }

  /** Runs `fn` on the current links, once they are up. */
  private run<R>(sel: AxisSelector, fn: (c: Comm) => Promise<R>): Promise<R> {
    const p = this.peers
    if (p) return fn(this.comm(p, sel))
    return this.linked.then(() => this.run(sel, fn))
  }

  /**
   * Reduces `data` over the selected axes; every member of each sub-group gets the identical result.
   * @example const g = await currentMesh().allReduce(grad, { op: 'mean', axis: 'data' })
   */
  allReduce(data: Float32Array, opts: AllReduceOptions = {}): Promise<Float32Array> {
    return this.run(opts, (c) => allReduce(c, data, opts.op ?? 'sum', opts.chunkBytes, opts.out))
  }

  /**
   * Reduces `data` over the selected axes and returns this member's shard of the result: of N floats
   * over a sub-group of n, the member at position s (its coordinate, for one axis) gets floats
   * [s·⌊N/n⌋ + min(s, N mod n), …) of length ⌊N/n⌋, plus one for the first N mod n positions.
   * Its bits equal those of the same floats of `allReduce`.
   * @example const shard = await currentMesh().reduceScatter(grad, { axis: 'data' })
   */
  reduceScatter(data: Float32Array, opts: ReduceScatterOptions = {}): Promise<Float32Array> {
    return this.run(opts, (c) => reduceScatter(c, data, opts.op ?? 'sum', opts.chunkBytes, opts.out))
  }

  /**
   * Concatenates every sub-group member's `shard`, in rank order; every member gets the same bytes.
   * Shards may differ in length (empty ones too). After `reduceScatter`, gives the `allReduce` result.
   * @example const full = await currentMesh().allGather(shard, { axis: 'data' })
   */
  allGather(shard: Float32Array, opts: AllGatherOptions = {}): Promise<Float32Array> {
    return this.run(opts, (c) => allGather(c, shard, opts.chunkBytes, opts.out))
  }

  /** Overwrites `buf` on every member with the root's bytes; all members pass the same byte length. */
  broadcast<T extends ArrayBufferView>(buf: T, opts: BroadcastOptions = {}): Promise<T> {
    return this.run(opts, (c) => broadcast(c, buf, opts.root ?? 0))
  }

  /** Resolves when every member of the sub-group has reached it. */
  barrier(opts: AxisSelector = {}): Promise<void> {
    return this.run(opts, (c) => barrier(c))
  }

  /** @internal Drops the current links (collectives in flight fail with `reason`); later collectives wait for `relink`.
   * */
  unlink(reason?: FrayError): void {
    this.peers?.close(reason)
    this.peers = null
    this.comms = new Map()
    if (!this.settleLink) {
      this.linked = new Promise<void>((resolve, reject) => (this.settleLink = { resolve, reject }))
      this.linked.catch(() => {})
    }
  }

  /** @internal New links to every member: collectives count from zero again, as on every other member. */
  relink(peers: Peers): void {
    if (this.closed) return peers.close()
    this.peers = peers
    this.comms = new Map()
    this.settleLink?.resolve()
    this.settleLink = null
  }

  /** @internal The links cannot come back: waiting and later collectives fail with `err`. */
  fail(err: FrayError): void {
    if (this.settleLink) this.settleLink.reject(err)
    else {
      this.linked = Promise.reject(err)
      this.linked.catch(() => {})
    }
    this.settleLink = null
    this.peers?.close(err)
    this.peers = null
  }

  close(): void {
    this.closed = true
    this.fail(new FrayError('NOT_IN_MESH', `member ${this.rank} left mesh ${this.meshId}`))
  }
}
