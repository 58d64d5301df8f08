import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, expect, test } from 'vitest'
import { ingest } from '../dataset/ingest.js'
import { openDataset } from '../dataset/open-dataset.js'
import { brownParagraphs, gpt2Files } from '../test-support/brown.js'
import { BpeTokenizer } from '../tokenizer/bpe-tokenizer.js'
import { buildTokenCache } from './build-token-cache.js'
import { TokenCache } from './token-cache.js'
import { tokenizeShard } from './tokenize-shard.js'

const root = mkdtempSync(join(tmpdir(), 'datakit-resume-'))
const prefix = join(root, 'marin')
afterAll(() => rmSync(root, { recursive: true, force: true }))
const { encoderJson, vocabBpe } = gpt2Files()
const tok = BpeTokenizer.fromGpt2Files(encoderJson, vocabBpe)

test('a finished shard is never redone', async () => {
  mkdirSync(join(root, 'a'), { recursive: true })
  writeFileSync(
    join(root, 'a', 'x.jsonl'),
    brownParagraphs(1)
      .map((text) => JSON.stringify({ text }))
      .join('\n'),
  )
  await ingest({ name: 'one', source: join(root, 'a', 'x.jsonl'), format: 'jsonl', prefix })
  const v = await openDataset('one', { prefix })
  const dir = join(root, 'work')
  mkdirSync(dir)
  writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify(tok.toJSON()))
  const task = {
    url: v.shards[0]!,
    shard: 0,
    total: 1,
    dir,
    tokenizer: join(dir, 'tokenizer.json'),
    dtype: 'uint16' as const,
  }
  const first = await tokenizeShard(task) // loads the tokenizer from the file, as a worker does
  const mtime = statSync(join(dir, 'part-00000-of-00001.tokens')).mtimeMs
  expect(await tokenizeShard(task, tok)).toEqual(first)
  expect(statSync(join(dir, 'part-00000-of-00001.tokens')).mtimeMs).toBe(mtime)
  expect(first.documents).toBe(brownParagraphs(1).length)
})

test('a build that failed on one shard resumes and matches a clean build', async () => {
  mkdirSync(join(root, 'b'), { recursive: true })
  const ps = brownParagraphs(3)
  for (let s = 0; s < 3; s++)
    writeFileSync(
      join(root, 'b', `p${s}.jsonl`),
      ps
        .filter((_, i) => i % 3 === s)
        .map((text) => JSON.stringify({ text }))
        .join('\n'),
    )
  await ingest({ name: 'three', source: join(root, 'b', '*.jsonl'), format: 'jsonl', prefix })
  const v = await openDataset('three', { prefix })
  // Damage the local copy of the last shard: its task fails after the others finished.
  const last = new URL(v.shards[2]!).pathname
  const good = readdirSync(join(prefix, 'datakit-cache')).length
  const bytes = readFileSync(last)
  bytes.set(Buffer.from('XXXX'), bytes.length - 4) // same size, no Parquet footer
  writeFileSync(last, bytes)
  await expect(buildTokenCache({ dataset: 'three', tokenizer: tok, name: 'three', prefix })).rejects.toThrow(
    /not a readable Parquet file/,
  )
  const work = join(prefix, 'datakit-work', 'token-caches', 'three')
  const [key] = readdirSync(work)
  expect(
    readdirSync(join(work, key!))
      .filter((f) => f.endsWith('.done.json'))
      .sort(),
  ).toEqual(['part-00000-of-00003.done.json', 'part-00001-of-00003.done.json'])
  rmSync(last) // the next open fetches a verified copy again
  const resumed = await buildTokenCache({ dataset: 'three', tokenizer: tok, name: 'three', prefix })
  expect(readdirSync(join(prefix, 'datakit-cache'))).toHaveLength(good)
  const clean = await buildTokenCache({ dataset: 'three', tokenizer: tok, name: 'three-clean', prefix })
  expect(resumed.ledger.shards).toEqual(clean.ledger.shards)
  const [a, b] = [await TokenCache.open('three', { prefix }), await TokenCache.open('three-clean', { prefix })]
  expect(a.getBatch([0, 1, 2], 16, { seed: 3 })).toEqual(b.getBatch([0, 1, 2], 16, { seed: 3 }))
})
