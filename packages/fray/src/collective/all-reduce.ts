/**
 * @module All-reduce over Float32Array: reduce-scatter then all-gather, the bandwidth-optimal
 * pattern of ring all-reduce, but with direct exchange between members instead of passing
 * partial sums around the ring.
 *
 * Why direct and not ring: on one host (and on a small group) every pair of members has its
 * own link, so each member sends and receives the same (n-1)/n of the buffer twice, exactly as
 * in a ring, but in one step instead of n-1. And it makes the result exact: the owner of each
 * shard adds the members' contributions in rank order 0, 1, …, n-1 in float32, so the result
 * is bit-identical on every member (the owner computes each element once and everyone copies it)
 * and equal to a plain sequential float32 sum in rank order. A ring would add in a rotating
 * order, which differs per shard.
 *
 * The two phases are `reduce-scatter.ts` and the receiving half of `all-gather.ts`, run chunk by
 * chunk within one collective: an owner sends each reduced chunk to the others as soon as it is
 * done, so the gather of one chunk overlaps the reduction of the next.
 */
import { FrayError } from '../errors.js'
import { collectiveBytes } from '../internal/telemetry.js'
import { receiveInto } from './all-gather.js'
import { type Comm, DEFAULT_CHUNK_BYTES, KIND } from './comm.js'
import { checkOp, type ReduceOp, reduceOwned, sendToOwners } from './reduce-scatter.js'
import { plan, unzeroed } from './shards.js'

/**
 * Reduces `data` across the communicator's members; every member gets the same result, in
 * `out` (a new array by default; `out === data` reduces in place). Otherwise `data` is not modified.
 * Members that call it with a different op or length (or call another collective) fail at once
 * with `COLLECTIVE_MISMATCH`.
 */
export async function allReduce(
  comm: Comm,
  data: Float32Array,
  op: ReduceOp = 'sum',
  chunkBytes = DEFAULT_CHUNK_BYTES,
  into?: Float32Array,
): Promise<Float32Array> {
  checkOp('allReduce', op)
  if (into && into.length !== data.length)
    throw new FrayError(
      'COLLECTIVE_MISMATCH',
      `allReduce: out has ${into.length} floats but the input has ${data.length}; pass an out of the same length`,
    )
  const n = comm.ranks.length
  // Every byte of a new result is written below (reduced here or received), so it is not zeroed first.
  const out = into ?? (n === 1 ? new Float32Array(data.length) : unzeroed(data.length))
  const seq = comm.seq++
  collectiveBytes.inc(data.byteLength, { op })
  if (n === 1) {
    if (out !== data) out.set(data)
    return out
  }
  const agreed = comm.peers.begin(comm, seq, { name: 'allReduce', op, bytes: data.byteLength })
  const chunks = plan(data.length, n, Math.max(1, chunkBytes >> 2))
  const total = data.byteLength
  // Reduce-scatter: each chunk of another member's shard goes to its owner.
  const sends = sendToOwners(comm, seq, chunks, data)
  const work: Promise<unknown>[] = [agreed]
  for (let k = 0; k < chunks.length; k++) {
    const c = chunks[k]!
    if (c.owner === comm.me) {
      // Reduced, the chunk goes to every other member (all-gather).
      const gathered = reduceOwned(comm, seq, k, c, data, out.subarray(c.lo, c.hi), op).then((acc) => {
        const h = { comm: comm.id, seq, kind: KIND.allGather, chunk: k, total }
        for (let j = 0; j < n; j++) if (j !== comm.me) sends.push(comm.peers.send(comm.ranks[j]!, h, acc))
      })
      work.push(gathered)
    } else work.push(receiveInto(comm, comm.ranks[c.owner]!, seq, KIND.allGather, k, total, out.subarray(c.lo, c.hi)))
  }
  await Promise.all(work)
  // Our buffers may still be queued in the socket: wait until the kernel has them.
  await Promise.all(sends)
  return out
}
