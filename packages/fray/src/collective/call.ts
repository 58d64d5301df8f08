/**
 * @module What a member called, as it announces it to the others at the start of every
 * collective: the collective, its op or root, and the byte length. It travels in a frame
 * header (no payload), so announcing costs one small frame per peer. All-gather shards may
 * differ in length: two all-gathers match whatever their lengths, and each announcement tells
 * the others the length of that member's shard.
 */
import type { ReduceOp } from './reduce-scatter.js'

export type CollectiveCall =
  | { readonly name: 'allReduce' | 'reduceScatter'; readonly op: ReduceOp; readonly bytes: number }
  | { readonly name: 'allGather'; readonly bytes: number }
  | { readonly name: 'broadcast'; readonly root: number; readonly bytes: number }
  | { readonly name: 'barrier' }

const NAMES = ['allReduce', 'broadcast', 'barrier', 'reduceScatter', 'allGather'] as const
const OPS: readonly ReduceOp[] = ['sum', 'mean', 'max']

/** Packs a call into a frame's `chunk` (name, op/root) and `total` (bytes) fields. */
export function encodeCall(c: CollectiveCall): { chunk: number; total: number } {
  const name = NAMES.indexOf(c.name)
  if (c.name === 'allReduce' || c.name === 'reduceScatter')
    return { chunk: name | (OPS.indexOf(c.op) << 8), total: c.bytes }
  if (c.name === 'allGather') return { chunk: name, total: c.bytes }
  if (c.name === 'broadcast') return { chunk: name | ((c.root & 0xffff) << 16), total: c.bytes }
  return { chunk: name, total: 0 }
}

export function decodeCall(chunk: number, total: number): CollectiveCall {
  const name = NAMES[chunk & 0xff]
  if (name === 'allReduce' || name === 'reduceScatter')
    return { name, op: OPS[(chunk >>> 8) & 0xff] ?? 'sum', bytes: total }
  if (name === 'allGather') return { name, bytes: total }
  if (name === 'broadcast') return { name, root: chunk >>> 16, bytes: total }
  return { name: 'barrier' }
}

export function sameCall(a: CollectiveCall, b: CollectiveCall): boolean {
  if (a.name === 'allGather' && b.name === 'allGather') return true
  const x = encodeCall(a)
  const y = encodeCall(b)
  return x.chunk === y.chunk && x.total === y.total
}

/** @example "allReduce(op sum, 4000 bytes)" */
export function describeCall(c: CollectiveCall): string {
  if (c.name === 'allReduce' || c.name === 'reduceScatter') return `${c.name}(op ${c.op}, ${c.bytes} bytes)`
  if (c.name === 'allGather') return `allGather(${c.bytes} bytes)`
  if (c.name === 'broadcast') return `broadcast(root ${c.root}, ${c.bytes} bytes)`
  return 'barrier()'
}
