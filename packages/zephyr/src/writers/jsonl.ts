/** @module JSONL writer: one JSON value per line; `.gz`/`.zst` by extension. */
import type { TaskCounters } from '../counters.js'
import { ZephyrError } from '../errors.js'
import { openOutput } from '../internal/output.js'
import type { ShardWriter } from './writer.js'

const bigintToJson = (_k: string, v: unknown) =>
  typeof v === 'bigint' ? (Number.isSafeInteger(Number(v)) ? Number(v) : v.toString()) : v

export async function jsonlWriter(url: string, counters?: TaskCounters): Promise<ShardWriter> {
  const out = await openOutput(url, counters)
  return {
    async write(batch) {
      let text = ''
      for (const r of batch) {
        const line = JSON.stringify(r, bigintToJson)
        if (line === undefined)
          throw new ZephyrError(
            'UNWRITABLE_RECORD',
            `${url}: a record is not JSON-serializable (${typeof r}); map it to a plain object first`,
          )
        text += line + '\n'
      }
      await out.write(text)
    },
    close: () => out.close(),
    abort: (err) => out.abort(err),
  }
}
