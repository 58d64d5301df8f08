/**
 * @module One task of a token cache build: a Parquet shard of a dataset version → its flat
 * token array and document offsets, written atomically, then a `done` marker. A finished
 * shard is never redone, so a crashed build resumes where it stopped. The task is plain
 * data (file paths and numbers), so it can run in this process or in a worker process.
 */
import { createHash } from 'node:crypto'
import { existsSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { fnRef, ParquetReader } from '@marin/zephyr'
import { atomicWrite } from '../internal/atomic-write.js'
import { BpeTokenizer } from '../tokenizer/bpe-tokenizer.js'

/** What one shard task needs. */
export type ShardTask = {
  /** URL of the dataset's Parquet shard. */
  readonly url: string
  readonly shard: number
  readonly total: number
  /** Local folder of the build. */
  readonly dir: string
  /** Local path of the tokenizer.json. */
  readonly tokenizer: string
  readonly dtype: 'uint16' | 'uint32'
}

/** The ledger line of one shard. */
export type ShardSummary = {
  /** Base name: `part-00000-of-00004` (files `.tokens` and `.offsets`). */
  readonly name: string
  readonly documents: number
  /** Token ids in the shard (EOS separators are not stored; readers insert them). */
  readonly tokens: number
  /** UTF-8 bytes of the shard's text. */
  readonly bytes: number
  readonly tokensSha256: string
  readonly offsetsSha256: string
}

export function shardName(shard: number, total: number): string {
  const w = Math.max(5, String(total).length)
  return `part-${String(shard).padStart(w, '0')}-of-${String(total).padStart(w, '0')}`
}

const tokenizers = new Map<string, Promise<BpeTokenizer>>()

/** Tokenizes one shard (or returns the summary of the run that already did); `tokenizer` skips loading the task's file.
 * */
export async function tokenizeShard(task: ShardTask, tokenizer?: BpeTokenizer): Promise<ShardSummary> {
  const name = shardName(task.shard, task.total)
  const done = `${task.dir}/${name}.done.json`
  if (existsSync(done)) return JSON.parse(await readFile(done, 'utf8')) as ShardSummary
  if (!tokenizer && !tokenizers.has(task.tokenizer)) tokenizers.set(task.tokenizer, BpeTokenizer.load(task.tokenizer))
  const tok = tokenizer ?? (await tokenizers.get(task.tokenizer)!)
  let ids = task.dtype === 'uint16' ? new Uint16Array(1 << 16) : new Uint32Array(1 << 16)
  let n = 0
  const offsets: number[] = [0]
  let bytes = 0
  for await (const row of new ParquetReader({ path: task.url })) {
    const text = (row as { text: string }).text
    bytes += Buffer.byteLength(text, 'utf8')
    const enc = tok.encode(text)
    if (n + enc.length > ids.length) {
      const grown =
        task.dtype === 'uint16'
          ? new Uint16Array(Math.max(ids.length * 2, n + enc.length))
          : new Uint32Array(Math.max(ids.length * 2, n + enc.length))
      grown.set(ids.subarray(0, n))
      ids = grown
    }
    ids.set(enc, n)
    n += enc.length
    offsets.push(n)
  }
  const tokenBytes = new Uint8Array(ids.buffer, 0, n * ids.BYTES_PER_ELEMENT)
  const offsetBytes = new Uint8Array(new BigUint64Array(offsets.map(BigInt)).buffer)
  const summary: ShardSummary = {
    name,
    documents: offsets.length - 1,
    tokens: n,
    bytes,
    tokensSha256: createHash('sha256').update(tokenBytes).digest('hex'),
    offsetsSha256: createHash('sha256').update(offsetBytes).digest('hex'),
  }
  await atomicWrite(`${task.dir}/${name}.tokens`, tokenBytes)
  await atomicWrite(`${task.dir}/${name}.offsets`, offsetBytes)
  await atomicWrite(done, JSON.stringify(summary))
  return summary
}

/** A zephyr shard of tasks → their summaries; the tokenizer is loaded from each task's file (once per process). */
export async function* tokenizeShards(tasks: AsyncIterable<ShardTask>): AsyncGenerator<ShardSummary> {
  for await (const t of tasks) yield await tokenizeShard(t)
}

/** `tokenizeShards` by module reference: worker processes import this module to run it. */
export const TOKENIZE_SHARDS = fnRef<typeof tokenizeShards>(import.meta.url, 'tokenizeShards')
