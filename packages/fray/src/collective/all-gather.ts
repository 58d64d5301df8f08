/**
 * @module All-gather over Float32Array: every member gets the concatenation of every member's
 * shard, in rank order. Shards may differ in length (an empty one included): each member's
 * length travels in the announcement that starts every collective, so learning the lengths
 * costs no extra round trip. Direct exchange: every member sends its shard, chunk by chunk,
 * straight to every other member, and the bytes land in the result in place.
 */
import { FrayError } from '../errors.js'
import { collectiveBytes } from '../internal/telemetry.js'
import type { CollectiveCall } from './call.js'
import { type Comm, DEFAULT_CHUNK_BYTES, KIND } from './comm.js'
import { overlaps, unzeroed } from './shards.js'

/** Receives chunk `k` of a collective from `from`, straight into `dest` unless it arrived before we asked. */
export function receiveInto(
  comm: Comm,
  from: number,
  seq: number,
  kind: number,
  k: number,
  total: number,
  dest: Float32Array,
): Promise<void> {
  const bytes = new Uint8Array(dest.buffer, dest.byteOffset, dest.byteLength)
  return comm.peers.recv(from, comm.id, seq, kind, k, total, bytes).then((b) => {
    if (b !== bytes) bytes.set(b)
  })
}

/** Bytes of a member's shard, from its announcement (which matched ours, so it is an all-gather). */
const shardBytes = (c: CollectiveCall | undefined): number => (c?.name === 'allGather' ? c.bytes : 0)

/**
 * Gathers every member's `shard` into one array, in rank order; every member gets the same
 * bytes, in `out` (a new array by default; it must have the total length, and may hold this
 * member's shard at its own offset, for in place). Members that call another collective fail at
 * once with `COLLECTIVE_MISMATCH`.
 */
export async function allGather(
  comm: Comm,
  shard: Float32Array,
  chunkBytes = DEFAULT_CHUNK_BYTES,
  into?: Float32Array,
): Promise<Float32Array> {
  const n = comm.ranks.length
  const seq = comm.seq++
  collectiveBytes.inc(shard.byteLength, { op: 'gather' })
  const total = shard.byteLength
  const chunkFloats = Math.max(1, chunkBytes >> 2)
  const sends: Promise<void>[] = []
  let lengths: number[] = [shard.length]
  if (n > 1) {
    const agreed = comm.peers.begin(comm, seq, { name: 'allGather', bytes: total })
    for (let lo = 0, k = 0; lo < shard.length; lo += chunkFloats, k++) {
      const part = shard.subarray(lo, Math.min(lo + chunkFloats, shard.length))
      const h = { comm: comm.id, seq, kind: KIND.allGather, chunk: k, total }
      for (let j = 0; j < n; j++) if (j !== comm.me) sends.push(comm.peers.send(comm.ranks[j]!, h, part))
    }
    const heard = await agreed
    lengths = comm.ranks.map((r, j) => (j === comm.me ? shard.length : shardBytes(heard.get(r)) / 4))
  }
  const offsets: number[] = []
  let length = 0
  for (const l of lengths) {
    offsets.push(length)
    length += l
  }
  const mine = offsets[comm.me]!
  if (into && into.length !== length)
    throw new FrayError(
      'COLLECTIVE_MISMATCH',
      `allGather: out has ${into.length} floats but the shards add up to ${length} ` +
        `(${lengths.join(' + ')}); pass an out of that length`,
    )
  if (into && overlaps(into, shard) && shard.byteOffset !== into.byteOffset + mine * 4)
    throw new FrayError(
      'COLLECTIVE_MISMATCH',
      `allGather: the shard overlaps out elsewhere than at its own offset (float ${mine}); ` +
        'pass a separate array, or the shard as exactly that range of out for in place',
    )
  // Every byte of a new result is written below (copied or received), so it is not zeroed first.
  const out = into ?? (n === 1 ? new Float32Array(length) : unzeroed(length))
  if (!overlaps(out, shard)) out.set(shard, mine)
  const work: Promise<void>[] = []
  for (let j = 0; j < n; j++) {
    if (j === comm.me) continue
    const from = comm.ranks[j]!
    for (let lo = 0, k = 0; lo < lengths[j]!; lo += chunkFloats, k++) {
      const dest = out.subarray(offsets[j]! + lo, offsets[j]! + Math.min(lo + chunkFloats, lengths[j]!))
      work.push(receiveInto(comm, from, seq, KIND.allGather, k, lengths[j]! * 4, dest))
    }
  }
  await Promise.all(work)
  // Our buffers may still be queued in the socket: wait until the kernel has them.
  await Promise.all(sends)
  return out
}
