/**
 * @module Broadcast and barrier. Broadcast is direct: the root sends each chunk to every
 * other member (on one host the root's links run in parallel; a tree only pays off when
 * links are shared). Barrier: every member tells every other member it arrived.
 */
import { type Comm, DEFAULT_CHUNK_BYTES, KIND } from './comm.js'

/**
 * Every member passes a buffer of the same byte length; afterwards each holds the root's bytes
 * (written in place and returned). `root` is a position in the communicator.
 */
export async function broadcast<T extends ArrayBufferView>(
  comm: Comm,
  buf: T,
  root = 0,
  chunkBytes = DEFAULT_CHUNK_BYTES,
): Promise<T> {
  const seq = comm.seq++
  const n = comm.ranks.length
  const bytes = new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength)
  const total = bytes.byteLength
  const chunks = Math.max(1, Math.ceil(total / chunkBytes))
  // Every member learns of a mismatched call, even those that receive nothing from the others.
  const agreed = comm.peers.begin(comm, seq, { name: 'broadcast', root, bytes: total })
  if (comm.me === root) {
    const sends: Promise<void>[] = []
    for (let k = 0; k < chunks; k++) {
      const part = bytes.subarray(k * chunkBytes, Math.min(total, (k + 1) * chunkBytes))
      for (let j = 0; j < n; j++) {
        if (j !== root)
          sends.push(
            comm.peers.send(comm.ranks[j]!, { comm: comm.id, seq, kind: KIND.broadcast, chunk: k, total }, part),
          )
      }
    }
    await Promise.all([agreed, ...sends])
    return buf
  }
  const from = comm.ranks[root]!
  await Promise.all([
    agreed,
    ...Array.from({ length: chunks }, (_, k) => {
      const dest = bytes.subarray(k * chunkBytes, Math.min(total, (k + 1) * chunkBytes))
      return comm.peers.recv(from, comm.id, seq, KIND.broadcast, k, total, dest).then((b) => {
        if (b !== dest) dest.set(b)
      })
    }),
  ])
  return buf
}

/** Resolves once every member of the communicator has called `barrier`: the announcements are the barrier. */
export async function barrier(comm: Comm): Promise<void> {
  const seq = comm.seq++
  if (comm.ranks.length > 1) await comm.peers.begin(comm, seq, { name: 'barrier' })
}
