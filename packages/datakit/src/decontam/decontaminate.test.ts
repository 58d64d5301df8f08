/**
 * Decontamination on real text in a real store: Brown training paragraphs with evaluation
 * sentences (from held-out Brown files) planted in some of them, case and punctuation changed.
 * Every planted document is found, with its task, and no other; flagging keeps every document;
 * the same index reuses the version, a changed one makes a new version.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ZephyrContext } from '@marin/zephyr'
import { afterAll, describe, expect, test } from 'vitest'
import { readBrown } from '../corpus/brown.js'
import { Dataset } from '../dataset/from-datakit.js'
import { ingest } from '../dataset/ingest.js'
import { DatakitError } from '../errors.js'
import { decontaminate } from './decontaminate.js'
import { buildNgramIndex, matchNgrams, ngramHashes, wordsOf } from './ngram-index.js'

const root = mkdtempSync(join(tmpdir(), 'datakit-decontam-'))
const prefix = join(root, 'marin')
const context = new ZephyrContext({ inProcess: true, progress: 'off' })
afterAll(async () => {
  await context.close()
  rmSync(root, { recursive: true, force: true })
})

const train = readBrown({ part: 'train', files: 8 }).flatMap((d) => d.paragraphs.map((p) => p.join(' ')))
const heldOut = readBrown({ part: 'held-out', files: 2 })
const long = (s: string) => wordsOf(s).length >= 16
const qa = heldOut[0]!.paragraphs.flat().filter(long).slice(0, 20)
const bpb = heldOut[1]!.paragraphs.flat().filter(long).slice(0, 20)
const short = ['Too short to match on.']

/** Every 17th training paragraph gets an evaluation sentence, upper-cased, its commas dropped. */
const planted = new Map<number, string>()
const docs = train.map((text, i) => {
  if (i % 17 !== 5) return text
  const task = planted.size % 2 === 0 ? 'brown_qa' : 'brown_bpb'
  const s = (task === 'brown_qa' ? qa : bpb)[planted.size % 20]!
  planted.set(i, task)
  const cut = text.indexOf(' ', text.length >> 1)
  return `${text.slice(0, cut)} ${s.toUpperCase().replaceAll(',', '')} ${text.slice(cut + 1)}`
})

describe('word n-grams', () => {
  test('words are the dedup normalization (NFKC, lower case, no punctuation) split on spaces', () => {
    expect(wordsOf('  The ﬁrst,  WORD!\n"quoted" ')).toEqual(['the', 'first', 'word', 'quoted'])
    expect(ngramHashes(wordsOf('a b c d'), 3)).toHaveLength(2)
    expect(ngramHashes(wordsOf('a b'), 3)).toHaveLength(0)
  })

  test('an index matches shared n-grams with their tasks, and counts the too-short documents', async () => {
    const index = await buildNgramIndex(
      [
        { task: 'a', texts: ['one two three four five'] },
        { task: 'b', texts: ['three four five six', 'x'] },
      ],
      { n: 3 },
    )
    expect(index.tooShort).toEqual([0, 1])
    expect(matchNgrams(index, 'zero ONE two, three! four')).toEqual({ tasks: [0], ngrams: 2 })
    expect(matchNgrams(index, 'three four five')).toEqual({ tasks: [0, 1], ngrams: 1 })
    expect(matchNgrams(index, 'one two four five seven')).toBeUndefined()
  })

  test('bad arguments name what is wrong', async () => {
    await expect(buildNgramIndex([{ task: 'a', texts: [] }], { n: 0 })).rejects.toThrow(/n must be an integer/)
    await expect(
      buildNgramIndex([
        { task: 'a', texts: [] },
        { task: 'a', texts: [] },
      ]),
    ).rejects.toThrow(/task "a" is given twice/)
    await expect(buildNgramIndex([{ task: 'a', texts: [3 as unknown as string] }])).rejects.toThrow(
      /task "a" document 0 is number, not a string/,
    )
  })
})

describe('decontaminate a dataset', () => {
  mkdirSync(join(root, 'src'), { recursive: true })
  // three source files: three shards, so positions are counted per shard
  const third = Math.ceil(docs.length / 3)
  for (let f = 0; f < 3; f++) {
    const part = docs.slice(f * third, (f + 1) * third)
    writeFileSync(join(root, 'src', `train-${f}.jsonl`), `${part.map((text) => JSON.stringify({ text })).join('\n')}\n`)
  }
  const evalSets = [
    { task: 'brown_qa', texts: qa },
    { task: 'brown_bpb', texts: [...bpb, ...short] },
  ]

  test('finds every planted document with its task, and no other', async () => {
    expect(planted.size).toBeGreaterThanOrEqual(10)
    const source = [0, 1, 2].map((f) => join(root, 'src', `train-${f}.jsonl`))
    const ingested = await ingest({ name: 'train', source, format: 'jsonl', prefix, context })
    expect(ingested.records).toBe(docs.length)
    const index = await buildNgramIndex(evalSets)
    const { report, reused } = await decontaminate('train', { prefix, context, index, output: 'train-clean' })
    expect(reused).toBe(false)
    expect(report.documentsIn).toBe(docs.length)
    expect(report.contaminated).toBe(planted.size)
    expect(report.kept).toBe(docs.length - planted.size)
    const perTask = Object.fromEntries(report.perTask.map((p) => [p.task, p]))
    const want = (t: string) => [...planted.values()].filter((v) => v === t).length
    expect(perTask.brown_qa).toMatchObject({ evalDocuments: 20, evalTooShort: 0, documents: want('brown_qa') })
    expect(perTask.brown_bpb).toMatchObject({ evalDocuments: 21, evalTooShort: 1, documents: want('brown_bpb') })
    const kept = (await context.execute(Dataset.fromDatakit('train-clean', { prefix }))).results.map((r) => r.text)
    expect(kept).toEqual(docs.filter((_, i) => !planted.has(i)))
  })

  test('flagging keeps every document and marks the planted ones in meta', async () => {
    const index = await buildNgramIndex(evalSets)
    await decontaminate('train', { prefix, context, index, mode: 'flag', output: 'train-flagged' })
    const rows = (await context.execute(Dataset.fromDatakit('train-flagged', { prefix }))).results
    expect(rows.map((r) => r.text)).toEqual(docs)
    rows.forEach((r, i) => {
      const meta = JSON.parse(r.meta) as { contamination?: { tasks: string[]; ngrams: number } }
      if (planted.has(i)) expect(meta.contamination?.tasks).toEqual([planted.get(i)])
      else expect(meta.contamination).toBeUndefined()
    })
  })

  test('the same index reuses the version; another evaluation set makes a new one', async () => {
    const into = { prefix, context, output: 'train-reuse' }
    const first = await decontaminate('train', { ...into, index: await buildNgramIndex(evalSets) })
    const again = await decontaminate('train', { ...into, index: await buildNgramIndex(evalSets) })
    expect(again).toMatchObject({ reused: true, version: first.version })
    const fewer = await decontaminate('train', {
      ...into,
      index: await buildNgramIndex([{ task: 'brown_qa', texts: qa }]),
    })
    expect(fewer.reused).toBe(false)
    expect(fewer.version).not.toBe(first.version)
    expect(fewer.report.contaminated).toBe([...planted.values()].filter((v) => v === 'brown_qa').length)
  })

  test('a bad mode is refused, naming it', async () => {
    const index = await buildNgramIndex(evalSets)
    const err = await decontaminate('train', { prefix, context, index, mode: 'drop' as 'remove' }).catch((e) => e)
    expect(err).toBeInstanceOf(DatakitError)
    expect((err as DatakitError).code).toBe('INVALID_ARGUMENT')
    expect((err as Error).message).toMatch(/mode must be 'remove' or 'flag', got drop/)
  })
})

test('the index travels to worker processes', async () => {
  const workers = new ZephyrContext({ maxWorkers: 1, progress: 'off' })
  try {
    const index = await buildNgramIndex([{ task: 'brown_qa', texts: qa }])
    const r = await decontaminate('train', { prefix, context: workers, index, mode: 'flag', output: 'train-w' })
    expect(r.report.contaminated).toBe([...planted.values()].filter((v) => v === 'brown_qa').length)
  } finally {
    await workers.close()
  }
}, 60_000)
