/**
 * @module The per-shard writer of a dedup pass, a module export reached by reference so
 * zephyr's worker processes import it with what it uses: it keeps the documents the pass
 * kept and applies the paragraph and line removals decided for them (an edited document
 * gets the content id of its new text).
 */
import { fnRef, type ShardInfo } from '@marin/zephyr'
import { contentId, type DatakitRecord } from '../dataset/record.js'
import { applySpanEdit, type SpanEdit } from './spans.js'

export type DedupShardArgs = {
  /** 1 = kept, by document position in shard order. */
  readonly keep: Uint8Array
  /** The position of each shard's first document. */
  readonly shardStart: readonly number[]
  /** Span removals by document position. */
  readonly edits: ReadonlyMap<number, SpanEdit>
}

export async function* dedupShard(
  records: AsyncIterable<DatakitRecord>,
  info: ShardInfo,
  a: DedupShardArgs,
): AsyncGenerator<DatakitRecord> {
  let i = a.shardStart[info.shard]!
  for await (const r of records) {
    const at = i++
    if (a.keep[at] !== 1) continue
    const edit = a.edits.get(at)
    if (edit === undefined) yield { id: r.id, text: r.text, source: r.source, meta: r.meta }
    else {
      const text = applySpanEdit(r.text, edit)
      yield { id: contentId(text), text, source: r.source, meta: r.meta }
    }
  }
}

export const DEDUP_SHARD = fnRef<typeof dedupShard>(import.meta.url, 'dedupShard')
