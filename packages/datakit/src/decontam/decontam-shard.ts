/**
 * @module The per-shard functions of a decontamination pass, module exports reached by reference
 * so zephyr's worker processes import them: `decontamFind` yields the position and tasks of each
 * document that shares an n-gram with the index (nothing for the clean ones), and `decontamApply`
 * writes the shard with those documents dropped or flagged.
 */
import { fnRef, type ShardInfo } from '@marin/zephyr'
import type { DatakitRecord } from '../dataset/record.js'
import { DatakitError } from '../errors.js'
import { matchNgrams, type NgramIndex } from './ngram-index.js'

/** One contaminated document: where it is, its id, which tasks it overlaps and at how many n-grams. */
export type DecontamHit = {
  readonly shard: number
  readonly pos: number
  readonly id: string
  readonly tasks: number[]
  readonly ngrams: number
}

export async function* decontamFind(
  records: AsyncIterable<DatakitRecord>,
  info: ShardInfo,
  index: NgramIndex,
): AsyncGenerator<DecontamHit> {
  let pos = 0
  for await (const r of records) {
    const at = pos++
    const m = matchNgrams(index, r.text)
    if (m !== undefined) yield { shard: info.shard, pos: at, id: r.id, ...m }
  }
}

export type DecontamApplyArgs = {
  /** `remove` drops each hit; `flag` keeps it with `meta.contamination` set. */
  readonly mode: 'remove' | 'flag'
  /** Hits by shard, then by position in the shard. */
  readonly hits: ReadonlyMap<number, ReadonlyMap<number, { tasks: string[]; ngrams: number }>>
}

export async function* decontamApply(
  records: AsyncIterable<DatakitRecord>,
  info: ShardInfo,
  a: DecontamApplyArgs,
): AsyncGenerator<DatakitRecord> {
  const hits = a.hits.get(info.shard)
  let pos = 0
  for await (const r of records) {
    const hit = hits?.get(pos++)
    if (hit === undefined) yield r
    else if (a.mode === 'flag') yield { ...r, meta: withContamination(r, hit) }
  }
}

function withContamination(r: DatakitRecord, hit: { tasks: string[]; ngrams: number }): string {
  let meta: unknown
  try {
    meta = r.meta === '' ? {} : JSON.parse(r.meta)
  } catch (err) {
    throw new DatakitError('INVALID_ARGUMENT', `decontamination: record ${r.id} has meta that is not JSON`, {
      cause: err,
    })
  }
  const obj = typeof meta === 'object' && meta !== null && !Array.isArray(meta) ? meta : { value: meta }
  return JSON.stringify({ ...obj, contamination: hit })
}

export const DECONTAM_FIND = fnRef<typeof decontamFind>(import.meta.url, 'decontamFind')
export const DECONTAM_APPLY = fnRef<typeof decontamApply>(import.meta.url, 'decontamApply')
