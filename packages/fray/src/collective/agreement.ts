/**
 * @module Agreement on what each collective is. Every member announces its call to the other
 * members of the sub-group when it begins one; a collective goes ahead once every announcement
 * matches, and fails on every member as soon as one does not, naming the calls, instead of
 * waiting for frames that never come. Keyed by (communicator, sequence number).
 */
import { FrayError } from '../errors.js'
import { type CollectiveCall, describeCall, sameCall } from './call.js'

/** The sub-group a collective runs over. */
export type OpGroup = { readonly id: number; readonly ranks: readonly number[] }

/** A collective this member has begun: its call, what the others called, and who is still due. */
type Op = {
  group: OpGroup
  seq: number
  call: CollectiveCall
  heard: Map<number, CollectiveCall>
  due: Set<number>
  resolve: (heard: ReadonlyMap<number, CollectiveCall>) => void
  reject: (e: Error) => void
}

export const opKey = (comm: number, seq: number): string => `${comm}.${seq}`

export class Agreements {
  /** Announcements of collectives this member has not begun yet. */
  private readonly early = new Map<string, Map<number, CollectiveCall>>()
  private readonly ops = new Map<string, Op>()
  /** Collectives that failed on a mismatch: their late frames are dropped. */
  private readonly broken = new Set<string>()

  /** `onBroken` fails the rest of a collective (its pending receives) when it fails on a mismatch. */
  constructor(
    private readonly rank: () => number,
    private readonly onBroken: (key: string, err: FrayError) => void,
  ) {}

  isBroken(comm: number, seq: number): boolean {
    return this.broken.has(opKey(comm, seq))
  }

  /** This member's call: resolves, with every other member's call by rank, once all announced the same. */
  begin(group: OpGroup, seq: number, call: CollectiveCall): Promise<ReadonlyMap<number, CollectiveCall>> {
    const key = opKey(group.id, seq)
    const early = this.early.get(key)
    this.early.delete(key)
    const me = this.rank()
    return new Promise<ReadonlyMap<number, CollectiveCall>>((resolve, reject) => {
      const op: Op = {
        group,
        seq,
        call,
        heard: new Map(),
        due: new Set(group.ranks.filter((r) => r !== me)),
        resolve,
        reject,
      }
      this.ops.set(key, op)
      for (const [from, c] of early ?? []) if (this.ops.get(key) === op) this.check(key, op, from, c)
      if (op.due.size === 0 && this.ops.get(key) === op) this.settle(key, op)
    })
  }

  /** Member `from` announced `call` for collective `seq` of communicator `comm`. */
  heard(comm: number, seq: number, from: number, call: CollectiveCall): void {
    const key = opKey(comm, seq)
    if (this.broken.has(key)) return
    const op = this.ops.get(key)
    if (!op) {
      let m = this.early.get(key)
      if (!m) this.early.set(key, (m = new Map()))
      m.set(from, call)
      return
    }
    this.check(key, op, from, call)
    if (op.due.size === 0 && this.ops.get(key) === op) this.settle(key, op)
  }

  /** The links are gone: every collective waiting for announcements fails with `err`. */
  fail(err: FrayError): void {
    for (const op of this.ops.values()) op.reject(err)
    this.ops.clear()
  }

  private check(key: string, op: Op, from: number, call: CollectiveCall): void {
    op.due.delete(from)
    op.heard.set(from, call)
    if (sameCall(call, op.call)) return
    // Name every call this member knows of: its own and what the others announced.
    const calls = new Map(op.heard).set(this.rank(), op.call)
    const list = [...calls].sort((a, b) => a[0] - b[0]).map(([r, c]) => `member ${r} called ${describeCall(c)}`)
    const err = new FrayError(
      'COLLECTIVE_MISMATCH',
      `collective #${op.seq} over members [${op.group.ranks.join(', ')}] does not match: ${list.join(', ')}; ` +
        'every member must call the same collectives in the same order, with the same op, root and length',
    )
    this.ops.delete(key)
    this.broken.add(key)
    this.onBroken(key, err)
    op.reject(err)
  }

  private settle(key: string, op: Op): void {
    this.ops.delete(key)
    op.resolve(op.heard)
  }
}
