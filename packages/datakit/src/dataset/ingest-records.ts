/**
 * @module What ingest runs on zephyr's workers, per shard (one source file): each raw
 * row, page or text file → `{id, text, source, meta}` records, cleaned by the normalize
 * config. It is a module export reached by reference (`INGEST_RECORDS`) with its
 * settings as bound args, so worker processes import it with everything it uses.
 */
import type { ShardInfo, WikiPage } from '@marin/zephyr'
import { fnRef, formatPattern } from '@marin/zephyr'
import { DatakitError } from '../errors.js'
import { contentId, normalizeDocument } from './record.js'
import type { DatakitRecord, NormalizeConfig } from './record.js'
import { Tally } from './shard-tally.js'

/** The settings of one ingest, sent to every shard task. */
export type IngestArgs = {
  readonly name: string
  readonly format: 'jsonl' | 'parquet' | 'text' | 'wiki-xml'
  /** Source file URL of each shard. */
  readonly files: readonly string[]
  readonly textField: string
  readonly textUnit: 'file' | 'paragraph' | 'line'
  readonly normalize: Required<NormalizeConfig>
  /** The shards' output pattern (`<dir>/part-{shard:05d}-of-{total:05d}.parquet`); each tally goes beside its shard. */
  readonly output: string
}

type Raw = { text: string; meta: Record<string, unknown> }

function rawRecords(r: unknown, a: IngestArgs, file: string): Raw[] {
  switch (a.format) {
    case 'jsonl':
    case 'parquet': {
      const row = r as Record<string, unknown>
      const text = row[a.textField]
      if (typeof text !== 'string') {
        throw new DatakitError(
          'INVALID_ARGUMENT',
          `ingest ${a.name}: a record of ${file} has no string field "${a.textField}"; set textField`,
        )
      }
      const { [a.textField]: _, ...meta } = row
      return [{ text, meta }]
    }
    case 'wiki-xml': {
      const p = r as WikiPage
      return [{ text: p.text, meta: { title: p.title, pageId: p.id } }]
    }
    case 'text': {
      const f = r as { text: string }
      if (a.textUnit === 'file') return [{ text: f.text, meta: {} }]
      return f.text
        .split(a.textUnit === 'line' ? /\r?\n/ : /\r?\n\s*\r?\n/)
        .map((text, i) => ({ text, meta: { [a.textUnit]: i } }))
    }
  }
}

/**
 * One shard's loaded rows → normalized dataset records (documents left empty by cleaning are
 * dropped), tallied on their way into the shard: the tally is saved when the last has passed.
 */
export async function* ingestRecords(
  records: AsyncIterable<unknown>,
  shard: ShardInfo,
  a: IngestArgs,
): AsyncGenerator<DatakitRecord> {
  const file = a.files[shard.shard]!
  const source = file.slice(file.lastIndexOf('/') + 1)
  const tally = new Tally()
  for await (const r of records) {
    for (const raw of rawRecords(r, a, file)) {
      const text = normalizeDocument(raw.text, a.normalize)
      if (text === undefined) continue
      const record = { id: contentId(text), text, source, meta: JSON.stringify(raw.meta) }
      tally.add(record)
      yield record
    }
  }
  await tally.save(formatPattern(a.output, shard.shard, shard.total))
}

/** `ingestRecords` by module reference, for `Dataset.mapShard`. */
export const INGEST_RECORDS = fnRef<typeof ingestRecords>(import.meta.url, 'ingestRecords')
