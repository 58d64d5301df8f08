/**
 * @module The map side of out-of-core dedup, run per input shard on zephyr's worker
 * processes: each document's exact key and MinHash band keys become fixed-size records
 * `[key0, key1, key2, position]` (four little-endian u32), appended to one file per
 * bucket (`exact-B-S.bin`, `band-B-S.bin`, bucket B = key0 mod buckets) in the scratch
 * folder, plus the documents' UTF-8 lengths (`len-S.bin`). A worker holds one batch of
 * documents and a small buffer per bucket, whatever the shard's size.
 */
import { closeSync, openSync, writeSync } from 'node:fs'
import { join } from 'node:path'
import { exactKeys, MinHasher } from '@marin/dupekit'
import { fnRef, ParquetReader, type ShardInfo } from '@marin/zephyr'
import { openScratch, type Scratch } from './scratch.js'

export type SignArgs = {
  /** URLs of the input's Parquet shards. */
  readonly shards: readonly string[]
  /** The position of each shard's first document. */
  readonly shardStart: readonly number[]
  /** The scratch: a local folder, or a storage URL (`openScratch`). */
  readonly dir: string
  readonly buckets: number
  readonly exact: boolean
  readonly fuzzy: boolean
  readonly numPerm: number
  readonly numBands: number
  readonly ngram: number
  readonly seed: number
}

/** Documents signed per batch. */
const BATCH = 512
/** Bytes a bucket buffers before it is written. */
const FLUSH = 1 << 18

/** Records of one kind for every bucket, buffered and appended to that bucket's file of this shard. */
class BucketFiles {
  private readonly fds: number[]
  /** The files' names, one per bucket. */
  readonly names: string[]
  private readonly bufs: Uint32Array[]
  private readonly fill: number[]
  bytes = 0

  constructor(dir: string, kind: string, shard: number, buckets: number) {
    this.names = Array.from({ length: buckets }, (_, b) => `${kind}-${b}-${shard}.bin`)
    this.fds = this.names.map((name) => openSync(join(dir, name), 'w'))
    this.bufs = Array.from({ length: buckets }, () => new Uint32Array(FLUSH / 4))
    this.fill = new Array<number>(buckets).fill(0)
  }

  add(k0: number, k1: number, k2: number, pos: number): void {
    const b = k0 % this.bufs.length
    const buf = this.bufs[b]!
    let at = this.fill[b]!
    buf[at++] = k0
    buf[at++] = k1
    buf[at++] = k2
    buf[at++] = pos
    this.fill[b] = at
    if (at === buf.length) this.flush(b)
  }

  private flush(b: number): void {
    const n = this.fill[b]! * 4
    if (n === 0) return
    writeSync(this.fds[b]!, new Uint8Array(this.bufs[b]!.buffer, 0, n))
    this.bytes += n
    this.fill[b] = 0
  }

  close(): void {
    for (let b = 0; b < this.fds.length; b++) {
      this.flush(b)
      closeSync(this.fds[b]!)
    }
  }
}

/** Two 32-bit hashes of `sig[start, end)`, seeded by the band, so equal bands give equal keys. */
function bandKey(sig: Uint32Array, start: number, end: number, band: number): [number, number] {
  let h1 = (0x2545f491 ^ Math.imul(band + 1, 0x9e3779b1)) | 0
  let h2 = (0x6a09e667 + Math.imul(band, 0x85ebca77)) | 0
  for (let j = start; j < end; j++) {
    const v = sig[j]!
    h1 = Math.imul(h1 ^ v, 0x01000193)
    h1 ^= h1 >>> 15
    h2 = Math.imul((h2 << 7) | (h2 >>> 25), 0x5bd1e995) ^ v
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 0x85ebca6b)
  h1 = Math.imul(h1 ^ (h1 >>> 13), 0xc2b2ae35)
  h2 = Math.imul(h2 ^ (h2 >>> 16), 0xc2b2ae35)
  h2 = Math.imul(h2 ^ (h2 >>> 13), 0x27d4eb2f)
  return [(h1 ^ (h1 >>> 16)) >>> 0, (h2 ^ (h2 >>> 16)) >>> 0]
}

export type SignResult = { shard: number; documents: number; signatureBytes: number }

/** Shard indexes → their records written to the bucket files; yields what each shard wrote. */
export async function* signShards(
  items: AsyncIterable<number>,
  _info: ShardInfo,
  a: SignArgs,
): AsyncGenerator<SignResult> {
  const hasher = new MinHasher({ numPerm: a.numPerm, ngram: a.ngram, seed: a.seed })
  const rows = a.numPerm / a.numBands
  const scratch = await openScratch(a.dir)
  try {
    yield* signEach(items, a, hasher, rows, scratch)
  } finally {
    scratch.release()
  }
}

async function* signEach(
  items: AsyncIterable<number>,
  a: SignArgs,
  hasher: MinHasher,
  rows: number,
  scratch: Scratch,
): AsyncGenerator<SignResult> {
  for await (const shard of items) {
    const exact = a.exact ? new BucketFiles(scratch.local, 'exact', shard, a.buckets) : undefined
    const bands = a.fuzzy ? new BucketFiles(scratch.local, 'band', shard, a.buckets) : undefined
    const lengths: number[] = []
    let pos = a.shardStart[shard]!
    const sign = (texts: string[]): void => {
      const keys = exact ? exactKeys(texts) : []
      const sigs = bands ? hasher.signatures(texts) : new Uint32Array(0)
      for (let i = 0; i < texts.length; i++, pos++) {
        lengths.push(Buffer.byteLength(texts[i]!))
        const key = keys[i]
        if (exact && key !== undefined)
          exact.add(parseInt(key.slice(0, 8), 16), parseInt(key.slice(8, 16), 16), parseInt(key.slice(16, 24), 16), pos)
        if (bands)
          for (let b = 0; b < a.numBands; b++) {
            const [h1, h2] = bandKey(sigs, i * a.numPerm + b * rows, i * a.numPerm + (b + 1) * rows, b)
            bands.add(h1, h2, b, pos)
          }
      }
    }
    let batch: string[] = []
    try {
      for await (const row of new ParquetReader({ path: a.shards[shard]!, columns: ['text'] })) {
        batch.push((row as { text: string }).text)
        if (batch.length === BATCH) {
          sign(batch)
          batch = []
        }
      }
      sign(batch)
    } finally {
      exact?.close()
      bands?.close()
    }
    for (const name of [...(exact?.names ?? []), ...(bands?.names ?? [])]) await scratch.commit(name)
    await scratch.write(`len-${shard}.bin`, new Uint8Array(Uint32Array.from(lengths).buffer))
    yield { shard, documents: lengths.length, signatureBytes: (exact?.bytes ?? 0) + (bands?.bytes ?? 0) }
  }
}

export const SIGN_SHARDS = fnRef<typeof signShards>(import.meta.url, 'signShards')
