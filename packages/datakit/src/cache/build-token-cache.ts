/**
 * @module Building a token cache: a dataset version, tokenized shard by shard on zephyr,
 * committed to finestore as `token-caches/<name>`: per shard a flat token array
 * (`.tokens`, little-endian Uint16 when the vocabulary fits, else Uint32) and document
 * offsets (`.offsets`, Uint64), plus `ledger.json` and the `tokenizer.json` used.
 * Shards finished by a crashed build are kept; the same dataset and tokenizer again
 * return the existing version.
 *
 * @example
 * const { ref } = await buildTokenCache({ dataset: 'brown', tokenizer: tok, name: 'brown-gpt2' })
 * const cache = await TokenCache.open('brown-gpt2')
 */
import { createHash } from 'node:crypto'
import { mkdir, rm, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import type { JsonObject } from '@marin/finestore'
import { logger } from '@marin/rigging'
import { Dataset, ZephyrContext } from '@marin/zephyr'
import type { ZephyrContextOptions } from '@marin/zephyr'
import { findVersionByKey } from '../dataset/ingest.js'
import { openDataset } from '../dataset/open-dataset.js'
import { DatakitError } from '../errors.js'
import { defaultContext } from '../zephyr-context.js'
import { cacheArtifact, withStore, workDir } from '../store.js'
import type { StoreAccess } from '../store.js'
import type { BpeTokenizer } from '../tokenizer/bpe-tokenizer.js'
import { shardName, TOKENIZE_SHARDS } from './tokenize-shard.js'
import type { ShardSummary, ShardTask } from './tokenize-shard.js'

const log = logger('datakit')

/** The ledger of a token cache: what every shard must hold. */
export type TokenCacheLedger = {
  readonly format: 1
  readonly dtype: 'uint16' | 'uint32'
  readonly vocabSize: number
  /** Id placed after every document when sequences are packed. */
  readonly eos: number
  readonly dataset: string
  readonly datasetHash: string
  readonly tokenizerSha256: string
  readonly documents: number
  readonly tokens: number
  readonly bytes: number
  readonly shards: readonly ShardSummary[]
}

export type BuildTokenCacheOptions = StoreAccess & {
  /** Dataset name. */
  readonly dataset: string
  /** Dataset version. @default the latest */
  readonly version?: number
  readonly tokenizer: BpeTokenizer
  /** Cache name (`token-caches/<name>`). @default the dataset name */
  readonly name?: string
  /** EOS id. @default the id of `<|endoftext|>` among the tokenizer's special tokens */
  readonly eos?: number
  /** Worker processes tokenizing at once (zephyr's `maxWorkers`). @default the machine's cores (datakit's shared worker
   * context) */
  readonly workers?: number
  /** Extra zephyr context options, e.g. a fray `client`, or `inProcess: true` to tokenize in this process. */
  readonly zephyr?: ZephyrContextOptions
}

export type BuildTokenCacheResult = {
  readonly name: string
  readonly version: number
  readonly ref: string
  readonly reused: boolean
  readonly ledger: TokenCacheLedger
}

/** Tokenizes a dataset version into a token cache version (or returns the one an identical build made). */
export async function buildTokenCache(opts: BuildTokenCacheOptions): Promise<BuildTokenCacheResult> {
  const name = opts.name ?? opts.dataset
  const tok = opts.tokenizer
  const eos = opts.eos ?? tok.specialTokens.find((t) => t.content === '<|endoftext|>')?.id
  if (eos === undefined || !Number.isInteger(eos) || eos < 0 || eos >= tok.vocabSize) {
    throw new DatakitError(
      'INVALID_ARGUMENT',
      `buildTokenCache ${name}: no EOS id (got ${String(eos)}); pass ` +
        `eos, or give the tokenizer an <|endoftext|> special token`,
    )
  }
  const dtype = tok.vocabSize <= 65536 ? 'uint16' : 'uint32'
  const input = await openDataset(opts.dataset, opts)
  const tokJson = JSON.stringify(tok.toJSON())
  const tokenizerSha256 = createHash('sha256').update(tokJson).digest('hex')
  const config = {
    pass: 'tokenize',
    dataset: input.ref,
    datasetHash: String(input.metadata.datasetHash ?? ''),
    tokenizerSha256,
    eos,
    dtype,
  }
  const key = createHash('sha256').update(JSON.stringify(config)).digest('hex')
  const artifact = cacheArtifact(name)

  return withStore(opts, async (store) => {
    const found = await findVersionByKey(store, artifact, key)
    if (found !== undefined) {
      const view = await store.open(`${artifact}@${found}`)
      return {
        name,
        version: found,
        ref: view.ref,
        reused: true,
        ledger: JSON.parse(await view.readText('ledger.json')) as TokenCacheLedger,
      }
    }
    const dir = workDir(opts, 'token-caches', name, key.slice(0, 16))
    await mkdir(dir, { recursive: true })
    const tokenizerPath = join(dir, 'tokenizer.json')
    await writeFile(tokenizerPath, tokJson)
    const total = input.shards.length
    const tasks: ShardTask[] = input.shards.map((url, shard) => ({
      url,
      shard,
      total,
      dir,
      tokenizer: tokenizerPath,
      dtype,
    }))
    // the tokenizer travels as its file: each worker loads it once
    const plan = Dataset.fromList(tasks, { numShards: total }).mapShard(TOKENIZE_SHARDS)
    // the shared worker context, unless the caller asked for a worker count or other options
    const own = opts.workers !== undefined || opts.zephyr !== undefined
    const ctx = own
      ? new ZephyrContext({ progress: 'off', ...opts.zephyr, ...(opts.workers ? { maxWorkers: opts.workers } : {}) })
      : defaultContext()
    let results: unknown[]
    try {
      results = (await ctx.execute(plan)).results
    } finally {
      if (own) await ctx.close()
    }
    // Results come back per shard; order them by name, never by completion.
    const shards = (results as ShardSummary[]).slice().sort((a, b) => (a.name < b.name ? -1 : 1))
    if (shards.length !== total || shards.some((s, i) => s.name !== shardName(i, total))) {
      throw new DatakitError(
        'CACHE_LEDGER_MISMATCH',
        `buildTokenCache ${name}: expected ${total} shard results, got ${shards.map((s) => s.name).join(', ')}`,
      )
    }
    const ledger: TokenCacheLedger = {
      format: 1,
      dtype,
      vocabSize: tok.vocabSize,
      eos,
      dataset: input.ref,
      datasetHash: config.datasetHash,
      tokenizerSha256,
      documents: shards.reduce((a, s) => a + s.documents, 0),
      tokens: shards.reduce((a, s) => a + s.tokens, 0),
      bytes: shards.reduce((a, s) => a + s.bytes, 0),
      shards,
    }
    const metadata: JsonObject = {
      documents: ledger.documents,
      tokens: ledger.tokens,
      bytes: ledger.bytes,
      dtype,
      vocabSize: ledger.vocabSize,
      eos,
      shards: total,
      dataset: input.ref,
    }
    const { version, ref } = await store.commit(
      artifact,
      async (txn) => {
        for (const s of shards) {
          await txn.put(`${s.name}.tokens`, { file: join(dir, `${s.name}.tokens`) })
          await txn.put(`${s.name}.offsets`, { file: join(dir, `${s.name}.offsets`) })
        }
        await txn.put('tokenizer.json', tokJson)
        await txn.put('ledger.json', JSON.stringify(ledger, null, 2))
      },
      {
        kind: 'token-caches',
        metadata,
        config: { ...config, buildKey: key },
        lineage: [input.ref],
        message: `tokenize ${input.ref}`,
      },
    )
    await rm(dir, { recursive: true, force: true })
    log.info({ dataset: input.ref, cache: ref, tokens: ledger.tokens }, 'token cache built')
    return { name, version, ref, reused: false, ledger }
  })
}
