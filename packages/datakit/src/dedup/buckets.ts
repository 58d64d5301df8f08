/**
 * @module The reduce side of out-of-core dedup, run per bucket on zephyr's worker
 * processes: the bucket's records from every shard are sorted by key, then position, and
 * each run of equal keys becomes pairs `[first, other]` (two little-endian u32) in
 * `exact-pairs-B.bin` or `edges-B.bin`: for exact keys, each later copy of a document;
 * for band keys, a candidate pair with the run's first document (as dupekit's LSH index
 * pairs each document with the first of its bucket). Documents that the exact level
 * removed take no part in bands. A task holds one bucket: about 16 bytes per record.
 */
import { fnRef, type ShardInfo } from '@marin/zephyr'
import { openScratch, type Scratch } from './scratch.js'

export type BucketArgs = {
  /** The scratch: a local folder, or a storage URL (`openScratch`). */
  readonly dir: string
  readonly kind: 'exact' | 'band'
  readonly shards: number
  /** Bit i set: document i was removed by the exact level (band buckets skip it). */
  readonly exactRemoved?: Uint8Array
}

/** The bucket's records from every shard's file, as one array of 4-u32 records. */
async function readBucket(a: BucketArgs, scratch: Scratch, bucket: number): Promise<Uint32Array> {
  const parts: Uint8Array[] = []
  let bytes = 0
  for (let s = 0; s < a.shards; s++) {
    const b = await scratch.read(`${a.kind}-${bucket}-${s}.bin`)
    if (b === undefined) continue
    parts.push(b)
    bytes += b.length
  }
  const out = new Uint32Array(bytes / 4)
  let at = 0
  for (const p of parts) {
    out.set(new Uint32Array(p.buffer, p.byteOffset, p.length / 4), at)
    at += p.length / 4
  }
  return out
}

const compare = (r: Uint32Array) => (x: number, y: number) =>
  r[x * 4]! - r[y * 4]! ||
  r[x * 4 + 1]! - r[y * 4 + 1]! ||
  r[x * 4 + 2]! - r[y * 4 + 2]! ||
  r[x * 4 + 3]! - r[y * 4 + 3]!

/**
 * Indexes of the records `include` accepts, ordered by (key0, key1, key2, position). The
 * typed-array sort is native: each record becomes one u64, key0 above the high bits of
 * key1 above the record's index; runs that tie on those bits are then sorted in full.
 */
export function sortedOrder(r: Uint32Array, include: (i: number) => boolean): Uint32Array {
  const n = r.length / 4
  const bits = Math.max(1, Math.ceil(Math.log2(n + 1)))
  const low = 2 ** bits - 1
  const high = ~low >>> 0
  const keys = new BigUint64Array(n)
  const w = new Uint32Array(keys.buffer)
  let m = 0
  for (let i = 0; i < n; i++) {
    if (!include(i)) continue
    w[2 * m] = ((r[i * 4 + 1]! & high) | i) >>> 0
    w[2 * m + 1] = r[i * 4]!
    m++
  }
  keys.subarray(0, m).sort()
  const order = new Uint32Array(m)
  for (let j = 0; j < m; j++) order[j] = w[2 * j]! & low
  const cmp = compare(r)
  for (let j = 0; j < m; ) {
    let k = j + 1
    while (k < m && w[2 * k + 1] === w[2 * j + 1] && (w[2 * k]! & high) === (w[2 * j]! & high)) k++
    if (k - j > 1) order.set(Array.from(order.subarray(j, k)).sort(cmp), j)
    j = k
  }
  return order
}

export type BucketResult = { bucket: number; records: number; pairs: number }

/** Bucket indexes → their pairs files; yields what each bucket held and wrote. */
export async function* resolveBuckets(
  items: AsyncIterable<number>,
  _info: ShardInfo,
  a: BucketArgs,
): AsyncGenerator<BucketResult> {
  const scratch = await openScratch(a.dir)
  for await (const bucket of items) {
    const r = await readBucket(a, scratch, bucket)
    const n = r.length / 4
    // band records of documents the exact level removed are left out
    const removed = a.exactRemoved
    const order = sortedOrder(
      r,
      removed ? (i) => (removed[r[i * 4 + 3]! >>> 3]! & (1 << (r[i * 4 + 3]! & 7))) === 0 : () => true,
    )
    const pairs: number[] = []
    for (let i = 0; i < order.length; ) {
      const f = order[i]! * 4
      let j = i + 1
      for (; j < order.length; j++) {
        const o = order[j]! * 4
        if (r[o] !== r[f] || r[o + 1] !== r[f + 1] || r[o + 2] !== r[f + 2]) break
        if (r[o + 3] !== r[f + 3]) pairs.push(r[f + 3]!, r[o + 3]!)
      }
      i = j
    }
    const name = `${a.kind === 'exact' ? 'exact-pairs' : 'edges'}-${bucket}.bin`
    await scratch.write(name, new Uint8Array(Uint32Array.from(pairs).buffer))
    yield { bucket, records: n, pairs: pairs.length / 2 }
  }
}

export const RESOLVE_BUCKETS = fnRef<typeof resolveBuckets>(import.meta.url, 'resolveBuckets')
