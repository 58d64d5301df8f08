/**
 * The quality steps in a real store: a classifier trained on Cooking Stack Exchange titles
 * (baking vs food-safety) is committed and reused for the same config and data, a changed one
 * makes a new version; scoring a dataset of titles keeps what the threshold or top fraction says
 * (counts checked against scores computed here), annotates instead when told, and a record whose
 * text is not a string is skipped and counted with its id.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ZephyrContext } from '@marin/zephyr'
import { afterAll, describe, expect, test } from 'vitest'
import { Dataset } from '../dataset/from-datakit.js'
import { ingest } from '../dataset/ingest.js'
import type { DatakitRecord } from '../dataset/record.js'
import { loadClassifier } from './model-file.js'
import { scoreQuality } from './score-quality.js'
import { scoreShard } from './score-shard.js'
import { classifierModelPath, trainQualityClassifier } from './train-quality.js'

const root = mkdtempSync(join(tmpdir(), 'datakit-quality-step-'))
const prefix = join(root, 'marin')
const context = new ZephyrContext({ inProcess: true, progress: 'off' })
afterAll(async () => {
  await context.close()
  rmSync(root, { recursive: true, force: true })
})

const fixture = join(import.meta.dirname, '../../test-fixtures/cooking-stackexchange/cooking.stackexchange.txt')
const two = readFileSync(fixture, 'utf8')
  .split('\n')
  .filter((l) => l.split(' ').includes('__label__baking') !== l.split(' ').includes('__label__food-safety'))
  .map((l) => {
    const t = l.split(' ')
    const label = t.includes('__label__baking') ? '__label__baking' : '__label__food-safety'
    return `${label} ${t.filter((x) => !x.startsWith('__label__')).join(' ')}`
  })
const trainFile = join(root, 'train.txt')
writeFileSync(trainFile, `${two.slice(0, -300).join('\n')}\n`)
const texts = two.slice(-300).map((l) => l.slice(l.indexOf(' ') + 1))
const args = { dim: 16, epoch: 5, lr: 0.5, wordNgrams: 2, bucket: 10_000 }

describe('quality classifier step and scoring', () => {
  test('training commits a model, reuses it for the same config and data, versions a change', async () => {
    const first = await trainQualityClassifier({ name: 'cooking', file: trainFile, args, prefix })
    expect(first).toMatchObject({ ref: 'classifiers/cooking@1', reused: false })
    expect(first.stats).toMatchObject({ examples: two.length - 300, labels: 2 })
    const again = await trainQualityClassifier({ name: 'cooking', file: trainFile, args, prefix })
    expect(again).toMatchObject({ ref: first.ref, reused: true, modelBytes: first.modelBytes })
    const changed = await trainQualityClassifier({
      name: 'cooking',
      file: trainFile,
      args: { ...args, epoch: 6 },
      prefix,
    })
    expect(changed).toMatchObject({ ref: 'classifiers/cooking@2', reused: false })
    const { path } = await classifierModelPath('cooking@1', { prefix })
    expect([...(await loadClassifier(path)).labels].sort()).toEqual(['__label__baking', '__label__food-safety'])
  })

  test('threshold and top fraction keep the counts the scores say; annotate keeps all', async () => {
    mkdirSync(join(root, 'src'), { recursive: true })
    for (let f = 0; f < 2; f++) {
      const part = texts.slice(f * 150, (f + 1) * 150).map((text) => JSON.stringify({ text }))
      writeFileSync(join(root, 'src', `t-${f}.jsonl`), `${part.join('\n')}\n`)
    }
    await ingest({ name: 'titles', source: join(root, 'src', 't-*.jsonl'), format: 'jsonl', prefix, context })
    const { path } = await classifierModelPath('cooking@1', { prefix })
    const clf = await loadClassifier(path)
    const rows = (await context.execute(Dataset.fromDatakit('titles', { prefix }))).results
    const scores = rows.map((r) => clf.probability(r.text, 'baking') ?? 0)

    const opts = { prefix, context, classifier: 'classifiers/cooking@1', label: 'baking' }
    const byThreshold = await scoreQuality('titles', { ...opts, threshold: 0.5, output: 'titles-hq' })
    const want = scores.filter((s) => s >= 0.5).length
    expect(want).toBeGreaterThan(50)
    expect(want).toBeLessThan(250)
    expect(byThreshold.report).toMatchObject({ documentsIn: 300, scored: 300, kept: want, skipped: 0, cut: 0.5 })
    const kept = (await context.execute(Dataset.fromDatakit('titles-hq', { prefix }))).results
    expect(kept).toHaveLength(want)
    for (const r of kept) expect(JSON.parse(r.meta).quality.score).toBeGreaterThanOrEqual(0.5)

    const top = await scoreQuality('titles', { ...opts, topFraction: 0.1, output: 'titles-top' })
    expect(top.report.kept).toBe(30)
    expect(top.report.cut).toBe([...scores].sort((a, b) => b - a)[29])

    const annotated = await scoreQuality('titles', { ...opts, threshold: 0.5, mode: 'annotate', output: 'titles-all' })
    const all = (await context.execute(Dataset.fromDatakit('titles-all', { prefix }))).results
    expect(all).toHaveLength(300)
    expect(all.filter((r) => JSON.parse(r.meta).quality.kept).length).toBe(want)
    expect(annotated.report.kept).toBe(want)

    const same = await scoreQuality('titles', { ...opts, threshold: 0.5, output: 'titles-hq' })
    expect(same).toMatchObject({ reused: true, version: byThreshold.version })
    const other = await scoreQuality('titles', { ...opts, threshold: 0.6, output: 'titles-hq' })
    expect(other.reused).toBe(false)
    expect(other.version).toBe(byThreshold.version + 1)
  })

  test('bad options are refused, naming them', async () => {
    const opts = { prefix, context, classifier: 'cooking@1', label: 'baking' }
    await expect(scoreQuality('titles', opts)).rejects.toThrow(/exactly one of threshold and topFraction/)
    await expect(scoreQuality('titles', { ...opts, topFraction: 1.5 })).rejects.toThrow(/topFraction must be in/)
    await expect(scoreQuality('titles', { ...opts, label: 'sushi', threshold: 0.5 })).rejects.toThrow(
      /no label "sushi"; its labels: __label__baking, __label__food-safety/,
    )
  })

  test('a record whose text is not a string is skipped and counted with its id', async () => {
    const { path } = await classifierModelPath('cooking@1', { prefix })
    async function* records(): AsyncGenerator<DatakitRecord> {
      yield { id: 'a', text: texts[0]!, source: 's', meta: '' }
      yield { id: 'b', text: null as unknown as string, source: 's', meta: '' }
      yield { id: 'c', text: texts[1]!, source: 's', meta: '' }
    }
    const out = []
    for await (const s of scoreShard(records(), { stage: 0, shard: 3, total: 4 }, { model: path, label: 'baking' }))
      out.push(s)
    expect(out).toHaveLength(1)
    expect(out[0]!.shard).toBe(3)
    expect(out[0]!.skipped).toEqual([{ pos: 1, id: 'b', reason: 'text is null' }])
    expect(Number.isNaN(out[0]!.scores[1])).toBe(true)
    expect(out[0]!.scores[0]).toBeGreaterThan(0)
  })
})

test('scoring runs on worker processes, the model loaded there by path', async () => {
  const workers = new ZephyrContext({ maxWorkers: 1, progress: 'off' })
  try {
    const opts = { prefix, context: workers, classifier: 'cooking@1', label: 'baking', output: 'titles-w' }
    const r = await scoreQuality('titles', { ...opts, topFraction: 0.5 })
    expect(r.report).toMatchObject({ documentsIn: 300, kept: 150, skipped: 0 })
  } finally {
    await workers.close()
  }
}, 60_000)
