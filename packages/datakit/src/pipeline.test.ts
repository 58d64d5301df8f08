/**
 * End to end on a real corpus: Brown paragraphs plus planted duplicates → ingest → dedup →
 * token cache, in a real finestore store on local disk.
 */
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { openStore, storeUrl } from '@marin/finestore'
import { afterAll, describe, expect, test } from 'vitest'
import { buildTokenCache } from './cache/build-token-cache.js'
import { TokenCache } from './cache/token-cache.js'
import { Dataset } from './dataset/from-datakit.js'
import { ingest } from './dataset/ingest.js'
import { contentId } from './dataset/record.js'
import { dedup } from './dedup/dedup.js'
import { DatakitError } from './errors.js'
import { brownParagraphs, gpt2Files } from './test-support/brown.js'
import { BpeTokenizer } from './tokenizer/bpe-tokenizer.js'
import { defaultContext } from './zephyr-context.js'

const root = mkdtempSync(join(tmpdir(), 'datakit-pipeline-'))
const prefix = join(root, 'marin')
const src = join(root, 'src')
afterAll(() => rmSync(root, { recursive: true, force: true }))

// Eight Brown files give ~450 paragraphs of real prose; unique ones only, so every duplicate is planted.
const originals = [...new Set(brownParagraphs(8))]
const half = Math.floor(originals.length / 2)
const long = originals.slice(0, half).filter((p) => p.split(' ').length >= 40)
const exactPlants = long.slice(0, 6).map((p) => `  ${p.toUpperCase().replace(/ /g, ' \n ')}  `)
const nearPlants = long.slice(6, 12).map((p) => {
  const w = p.split(' ')
  w[Math.floor(w.length / 2)] = 'zebra'
  return w.join(' ')
})

async function readAll(ds: ReturnType<typeof Dataset.fromDatakit>): Promise<{ id: string; text: string }[]> {
  return (await defaultContext().execute(ds)).results
}

describe('ingest → dedup → tokenize on the Brown corpus', () => {
  mkdirSync(src, { recursive: true })
  writeFileSync(
    join(src, 'a-brown.jsonl'),
    originals
      .slice(0, half)
      .map((text, i) => JSON.stringify({ text, n: i }))
      .join('\n') + '\n',
  )
  writeFileSync(join(src, 'b-brown.txt'), originals.slice(half).join('\n\n'))
  writeFileSync(
    join(src, 'c-planted.jsonl'),
    [...exactPlants, ...nearPlants].map((text) => JSON.stringify({ text, planted: true })).join('\n') + '\n',
  )

  test('ingest writes records {id, text, source, meta} with content-hash ids', async () => {
    const a = await ingest({
      name: 'brown',
      source: [join(src, 'a-brown.jsonl'), join(src, 'c-planted.jsonl')],
      format: 'jsonl',
      prefix,
    })
    expect(a).toMatchObject({ ref: 'datasets/brown@1', version: 1, reused: false, records: half + 12 })
    const rows = await readAll(Dataset.fromDatakit('brown', { prefix }))
    expect(rows).toHaveLength(half + 12)
    expect(rows[0]).toEqual({
      id: contentId(originals[0]!),
      text: originals[0],
      source: 'a-brown.jsonl',
      meta: '{"n":0}',
    })
    expect(readdirSync(join(prefix, 'datakit-work', 'ingest', 'brown'))).toHaveLength(1)
    const text = await ingest({
      name: 'brown-text',
      source: join(src, 'b-brown.txt'),
      format: 'text',
      textUnit: 'paragraph',
      prefix,
    })
    expect(text.records).toBe(originals.length - half)
  })

  test('re-ingest is a no-op returning the same version; a changed config makes a new one', async () => {
    const again = await ingest({
      name: 'brown',
      source: [join(src, 'c-planted.jsonl'), join(src, 'a-brown.jsonl')],
      format: 'jsonl',
      prefix,
    })
    expect(again).toMatchObject({ ref: 'datasets/brown@1', reused: true, records: half + 12 })
    const store = await openStore({ url: storeUrl(prefix) })
    expect(await store.versions('datasets/brown')).toEqual([1])
    store.close()
    const other = await ingest({ name: 'brown-ws', source: join(src, 'a-brown.jsonl'), format: 'jsonl', prefix })
    const changed = await ingest({
      name: 'brown-ws',
      source: join(src, 'a-brown.jsonl'),
      format: 'jsonl',
      normalize: { collapseWhitespace: true, minChars: 5 },
      prefix,
    })
    expect([other.version, changed.version, changed.reused]).toEqual([1, 2, false])
  })

  test('dedup removes every planted duplicate and nothing else', async () => {
    const { ref, report } = await dedup('brown', { prefix })
    expect(ref).toBe('datasets/brown@2')
    expect(report).toMatchObject({
      documentsIn: half + 12,
      exactDuplicates: 6,
      fuzzyClusters: 6,
      fuzzyDuplicates: 6,
      kept: half,
    })
    expect(report.exampleClusters.length).toBe(5)
    const kept = await readAll(Dataset.fromDatakit('brown', { prefix }))
    expect(kept.map((r) => r.text)).toEqual(originals.slice(0, half))
    // The input version stays readable when pinned; the new one names it as lineage.
    expect(await readAll(Dataset.fromDatakit('brown', { prefix, version: 1 }))).toHaveLength(half + 12)
    const store = await openStore({ url: storeUrl(prefix) })
    expect((await store.manifest('datasets/brown', 2)).lineage).toEqual([{ artifact: 'datasets/brown', version: 1 }])
    store.close()
    expect((await dedup('brown', { prefix, version: 1 })).reused).toBe(true)
  })

  test('token caches: same batches with 1 and 2 workers, documents decode to their text', async () => {
    const { encoderJson, vocabBpe } = gpt2Files()
    const tok = BpeTokenizer.fromGpt2Files(encoderJson, vocabBpe)
    const one = await buildTokenCache({ dataset: 'brown', tokenizer: tok, name: 'brown-w1', workers: 1, prefix })
    const two = await buildTokenCache({ dataset: 'brown', tokenizer: tok, name: 'brown-w2', workers: 2, prefix })
    expect(one.ledger.dtype).toBe('uint16')
    expect(one.ledger.shards).toEqual(two.ledger.shards)
    expect(one.ledger.documents).toBe(half)
    const [c1, c2] = [await TokenCache.open('brown-w1', { prefix }), await TokenCache.open('brown-w2', { prefix })]
    expect(c1.numTokens).toBe(one.ledger.tokens + half)
    expect(tok.decode(c1.document(3))).toBe(originals[3])
    const n = c1.numSequences(64)
    const idx = Array.from({ length: 16 }, (_, i) => (i * 7) % n)
    expect(c1.getBatch(idx, 64)).toEqual(c2.getBatch(idx, 64))
    expect(c1.read(64, 64)).toEqual(c1.getBatch([1], 64)) // the flat stream training reads
    expect(c1.numBytes).toBe(one.ledger.bytes)
    expect(c1.getBatch(idx, 64, { seed: 5 })).toEqual(c2.getBatch(idx, 64, { seed: 5 }))
    expect(c1.getBatch(idx, 64, { seed: 5 })).not.toEqual(c1.getBatch(idx, 64))
    // Packing: the stream is the documents, each followed by EOS.
    const first = c1.getBatch([0], 64)
    const d0 = [...c1.document(0), tok.specialTokens[0]!.id, ...c1.document(1), tok.specialTokens[0]!.id]
    expect([...first.subarray(0, Math.min(64, d0.length))]).toEqual(d0.slice(0, 64))
    expect((await buildTokenCache({ dataset: 'brown', tokenizer: tok, name: 'brown-w1', prefix })).reused).toBe(true)
  })

  test('a cache built in process matches the one built by worker processes', async () => {
    const { encoderJson, vocabBpe } = gpt2Files()
    const tok = BpeTokenizer.fromGpt2Files(encoderJson, vocabBpe)
    const local = await buildTokenCache({
      dataset: 'brown',
      tokenizer: tok,
      name: 'brown-local',
      zephyr: { inProcess: true },
      prefix,
    })
    const one = await TokenCache.open('brown-w1', { prefix })
    expect(local.ledger.shards).toEqual(one.ledger.shards)
    const c = await TokenCache.open('brown-local', { prefix })
    const idx = [0, 3, 5, 8]
    expect(c.getBatch(idx, 32, { seed: 11 })).toEqual(one.getBatch(idx, 32, { seed: 11 }))
  }, 120_000)

  test('a ledger that disagrees with its shards is refused, naming the shard', async () => {
    const store = await openStore({ url: storeUrl(prefix) })
    const view = await store.open('token-caches/brown-w1')
    const ledger = JSON.parse(await view.readText('ledger.json'))
    ledger.shards[1].tokens += 1
    await store.commit(
      'token-caches/brown-w1',
      async (t) => {
        await t.put('ledger.json', JSON.stringify(ledger))
      },
      { inherit: true },
    )
    store.close()
    const err = await TokenCache.open('brown-w1', { prefix }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(DatakitError)
    expect(err).toMatchObject({
      code: 'CACHE_LEDGER_MISMATCH',
      message: expect.stringMatching(/shard part-00001-of-00002 disagrees with ledger.json/),
    })
    expect((await TokenCache.open('brown-w1', { prefix, version: 1 })).numDocuments).toBe(half)
  })
})
