/**
 * @module How a collective splits a buffer over the members of its sub-group. Shard `s` of
 * `length` floats over `n` members is a contiguous range, in rank order; the first `length mod n`
 * shards get one float more than the others (10 floats over 4 members: 3, 3, 2, 2). Each shard is
 * cut into chunks of at most one frame's payload.
 */

/** Chunk of a buffer: floats [lo, hi), in the shard of member position `owner`. */
export type Chunk = { owner: number; lo: number; hi: number }

/** The floats [lo, hi) of shard `s` when `length` floats are split over `n` members. */
export function shardRange(length: number, n: number, s: number): [number, number] {
  const base = Math.floor(length / n)
  const extra = length % n
  const lo = s * base + Math.min(s, extra)
  return [lo, lo + base + (s < extra ? 1 : 0)]
}

/** Splits [0, length) into one shard per member, each cut into chunks of at most `chunkFloats`. */
export function plan(length: number, n: number, chunkFloats: number): Chunk[] {
  const chunks: Chunk[] = []
  for (let s = 0; s < n; s++) {
    const [start, end] = shardRange(length, n, s)
    for (let lo = start; lo < end; lo += chunkFloats) chunks.push({ owner: s, lo, hi: Math.min(lo + chunkFloats, end) })
  }
  return chunks
}

/**
 * A Float32Array whose memory is not zeroed first, for a result every byte of which is written
 * (allocating and filling 16 MiB this way took 2 ms of CPU against 5 ms for a zeroed array).
 */
export function unzeroed(length: number): Float32Array {
  const b = Buffer.allocUnsafeSlow(length * 4)
  return new Float32Array(b.buffer, b.byteOffset, length)
}

/** Whether two arrays share any byte of memory. */
export function overlaps(a: ArrayBufferView, b: ArrayBufferView): boolean {
  return (
    a.buffer === b.buffer && a.byteOffset < b.byteOffset + b.byteLength && b.byteOffset < a.byteOffset + a.byteLength
  )
}
