/**
 * Mixtures of datasets: batch composition follows the weights (counted over 1,000 batches), stages
 * switch at their step, batches are a pure function of (seed, step) (a fresh mixture gives any
 * step's batch without the steps before it), a source that runs out is an error unless told to
 * repeat, and a pipeline killed mid-mixture resumes bit for bit, with eval loss and tokens per source.
 */
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { beforeAll, describe, expect, test } from 'vitest'
import { initBackend } from '../backend.js'
import { Gpt2LM } from '../models/lm.js'
import { Pipeline } from '../pipeline.js'
import { MemoryTracker } from '../trackers.js'
import { Trainer } from '../trainer.js'
import type { Batch } from './batch.js'
import { Dataset } from './dataset.js'

/** Source `s` holds ids [10·s, 10·s + 10): a row's source is its first id / 10. */
const source = (s: number, tokens: number, evalFraction = 0) =>
  Dataset.fromTokens(
    Array.from({ length: tokens }, (_, i) => 10 * s + ((i * 3 + (i >> 4)) % 10)),
    { evalFraction, numBytes: 2 * tokens },
  )
const sourcesOf = (b: Batch) => Array.from({ length: b.batchSize }, (_, r) => Math.floor(b.inputs[r * b.seqLen]! / 10))
/** Source `s` holds ids s·10⁶ + position: every sequence is distinct, and a row's source is its first id / 10⁶. */
const distinct = (s: number, tokens: number) =>
  Dataset.fromTokens(Array.from({ length: tokens }, (_, i) => s * 1e6 + i))
const distinctSourcesOf = (b: Batch) =>
  Array.from({ length: b.batchSize }, (_, r) => Math.floor(b.inputs[r * b.seqLen]! / 1e6))

describe('composition', () => {
  test('over 1,000 batches each source gives its weight of the rows, within 3 standard deviations', async () => {
    const mix = Dataset.mixture(
      { web: source(0, 100_000), wiki: source(1, 100_000), code: source(2, 100_000) },
      { weights: { web: 0.6, wiki: 0.3, code: 0.1 }, blockSize: 64 },
    )
    const counts = [0, 0, 0]
    const B = 8
    for (let s = 0; s < 1000; s++) for (const k of sourcesOf(await mix.trainBatch(s, B, 4, 7))) counts[k]!++
    const n = 1000 * B
    ;[0.6, 0.3, 0.1].forEach((w, k) => {
      expect(Math.abs(counts[k]! - w * n)).toBeLessThan(3 * Math.sqrt(n * w * (1 - w)))
    })
    expect(mix.consumed(1000, B, 7)).toEqual({ web: counts[0], wiki: counts[1], code: counts[2] })
  })

  test('weights change at their stage: until step 50 only web, then only wiki', async () => {
    const mix = Dataset.mixture(
      { web: source(0, 20_000), wiki: source(1, 20_000) },
      { weights: [{ untilStep: 50, weights: { web: 1 } }, { weights: { wiki: 1 } }] },
    )
    expect(new Set(sourcesOf(await mix.trainBatch(49, 4, 4, 1)))).toEqual(new Set([0]))
    expect(new Set(sourcesOf(await mix.trainBatch(50, 4, 4, 1)))).toEqual(new Set([1]))
    expect(mix.consumed(60, 4, 1)).toEqual({ web: 200, wiki: 40 })
    expect(mix.weightsAt(10)).toEqual({ web: 1, wiki: 0 })
  })

  test('a batch is a pure function of (seed, step); within an epoch no sequence of a source repeats', async () => {
    const opts = { weights: { a: 0.5, b: 0.5 }, blockSize: 16 }
    const mix = Dataset.mixture({ a: distinct(0, 4001), b: distinct(1, 4001) }, opts)
    const walked: Batch[] = []
    for (let s = 0; s <= 120; s++) walked.push(await mix.trainBatch(s, 4, 4, 3))
    const fresh = Dataset.mixture({ a: distinct(0, 4001), b: distinct(1, 4001) }, opts)
    expect((await fresh.trainBatch(120, 4, 4, 3)).inputs).toEqual(walked[120]!.inputs)
    expect((await fresh.trainBatch(120, 4, 4, 4)).inputs).not.toEqual(walked[120]!.inputs)
    // 1,000 sequences of 4 tokens per source; 484 rows so far: each row of a source is a different sequence
    const rowsOf = (k: number) =>
      walked.flatMap((b) =>
        distinctSourcesOf(b).flatMap((s, r) => (s === k ? [b.inputs.subarray(r * 4, r * 4 + 4).join(',')] : [])),
      )
    for (const k of [0, 1]) expect(new Set(rowsOf(k)).size).toBe(rowsOf(k).length)
  })

  test('a source that runs out is an error naming it, unless it may repeat', async () => {
    const small = () => ({ big: source(0, 100_000), small: source(1, 41) }) // 10 sequences of 4
    const mix = Dataset.mixture(small(), { weights: { big: 0.5, small: 0.5 } })
    let err: unknown
    for (let s = 0; s < 20 && !err; s++) await mix.trainBatch(s, 4, 4, 0).catch((e) => (err = e))
    expect((err as Error).message).toMatch(
      /source "small" ran out at step \d+: it has 10 training sequences of 4 tokens .* repeat: \{ small: true \}/,
    )
    const again = Dataset.mixture(small(), { weights: { big: 0.5, small: 0.5 }, repeat: { small: true } })
    for (let s = 0; s < 20; s++) await again.trainBatch(s, 4, 4, 0)
  })

  test('bad weights name the stage and the field', () => {
    const two = () => ({ a: source(0, 100), b: source(1, 100) })
    expect(() => Dataset.mixture(two(), { weights: { a: -1, b: 1 } })).toThrow(/weights\.a is -1/)
    expect(() => Dataset.mixture(two(), { weights: { c: 1 } })).toThrow(/names "c", which is not a source \(a, b\)/)
    expect(() => Dataset.mixture(two(), { weights: { a: 0 } })).toThrow(/gives every source weight 0/)
    expect(() =>
      Dataset.mixture(two(), {
        weights: [
          { untilStep: 10, weights: { a: 1 } },
          { untilStep: 5, weights: { b: 1 } },
        ],
      }),
    ).toThrow(/weights\[1\]\.untilStep 5 must be above 10/)
    expect(() => Dataset.mixture(two(), { weights: [{ weights: { a: 1 } }, { weights: { b: 1 } }] })).toThrow(
      /weights\[0\]\.untilStep undefined must be an integer above 0/,
    )
    expect(() => Dataset.mixture({ a: 'brown' as never }, { weights: { a: 1 } })).toThrow(
      /source "a" is the string "brown"; pass a levanter Dataset or an opened token cache \(datakit's TokenCache/,
    )
    expect(() => Dataset.mixture({ a: source(0, 100), b: { numTokens: 5 } as never }, { weights: { a: 1 } })).toThrow(
      /source "b" is neither a levanter Dataset nor a token source; pass a levanter Dataset or an opened token cache/,
    )
    const inner = Dataset.mixture(two(), { weights: { a: 1 } })
    expect(() => Dataset.mixture({ m: inner as never }, { weights: { m: 1 } })).toThrow(
      /source "m" is a mixture \(mixtures do not nest/,
    )
    expect(() => Dataset.fromDatakit('brown' as never)).toThrow(/the source is the string "brown"/)
  })
})

describe('token caches as sources', () => {
  /** What a datakit token cache gives levanter: numTokens, numBytes and an async read (no levanter Dataset). */
  const cache = (s: number, tokens: number) => {
    const ids = Array.from({ length: tokens }, (_, i) => 10 * s + ((i * 3 + (i >> 4)) % 10))
    return {
      numTokens: tokens,
      numBytes: 2 * tokens,
      read: async (start: number, length: number) => Int32Array.from(ids.slice(start, start + length)),
    }
  }

  test('a cache passed directly reads as Dataset.fromDatakit(cache, sourceOptions) would', async () => {
    const weights = { web: 0.7, wiki: 0.3 }
    const direct = Dataset.mixture(
      { web: cache(0, 5000), wiki: cache(1, 5000) },
      { weights, sourceOptions: { evalFraction: 0.1, eosId: 7 } },
    )
    const opts = { evalFraction: 0.1, eosId: 7 }
    const wrapped = Dataset.mixture(
      { web: Dataset.fromDatakit(cache(0, 5000), opts), wiki: Dataset.fromDatakit(cache(1, 5000), opts) },
      { weights },
    )
    for (const step of [0, 17, 120]) {
      const [a, b] = [await direct.trainBatch(step, 8, 4, 5), await wrapped.trainBatch(step, 8, 4, 5)]
      expect(a.inputs).toEqual(b.inputs)
      expect(a.mask).toEqual(b.mask)
    }
    // eosId 7 reached the wrapped caches: inputs equal to 7 are masked
    const batch = await direct.trainBatch(3, 8, 4, 5)
    expect(batch.inputs.some((x, i) => x === 7 && batch.mask[i] === 0)).toBe(true)
    expect(batch.mask.some((m) => m === 1)).toBe(true)
    // evalFraction 0.1 of 1,249 sequences of 4: 124 held out by each cache
    expect(direct.evalSets().map(({ name, dataset }) => [name, dataset.sequences(4).eval])).toEqual([
      ['web', 124],
      ['wiki', 124],
    ])
    expect(direct.bytesPerToken).toBe(2)
  })

  test('caches and Datasets mix; a Dataset keeps its own options', async () => {
    const mix = Dataset.mixture(
      { web: cache(0, 4000), wiki: source(1, 4000, 0.2) },
      { weights: { web: 0.5, wiki: 0.5 }, blockSize: 32 },
    )
    const seen = new Set<number>()
    for (let s = 0; s < 20; s++) for (const k of sourcesOf(await mix.trainBatch(s, 8, 4, 2))) seen.add(k)
    expect(seen).toEqual(new Set([0, 1]))
    // the cache takes levanter's default held-out fraction (0.05); the Dataset its own 0.2
    expect(mix.evalSets().map(({ dataset }) => dataset.sequences(4).eval)).toEqual([49, 199])
  })
})

describe('training on a mixture', () => {
  beforeAll(async () => {
    await initBackend()
  })
  const cfg = { vocabSize: 30, seqLen: 8, dModel: 16, nLayers: 1, nHeads: 2 }
  const mixture = () =>
    Dataset.mixture(
      { web: source(0, 3000, 0.1), wiki: source(1, 3000, 0.1) },
      { weights: [{ untilStep: 3, weights: { web: 0.8, wiki: 0.2 } }, { weights: { web: 0.3, wiki: 0.7 } }] },
    )
  /** Trains to step 6; `killAt` stops it at that step (after the checkpoint at step 2), as a crash would. */
  const run = (store: string, tracker = new MemoryTracker(), killAt?: number) =>
    new Pipeline({
      dataset: mixture(),
      model: new Gpt2LM(cfg, 0),
      trainer: new Trainer(
        {
          learningRate: 1e-2,
          batchSize: 4,
          logEvery: 1,
          evalEvery: 3,
          evalBatches: 1,
          checkpointEvery: 2,
          checkpointStore: store,
          runName: 'mix',
        },
        { trackers: [tracker] },
      ).addHook(1, (info) => {
        if (info.step === killAt) throw new Error('killed')
      }),
      maxSteps: 6,
    }).run()

  test('killed mid-mixture and resumed, it trains bit for bit; eval and tokens per source', async () => {
    const straight = fs.mkdtempSync(path.join(os.tmpdir(), 'lev-mix-a-'))
    const resumed = fs.mkdtempSync(path.join(os.tmpdir(), 'lev-mix-b-'))
    const tracker = new MemoryTracker()
    const whole = await run(straight, tracker)
    // killed at step 3: the newest checkpoint is step 2's, inside the first stage
    await expect(run(resumed, new MemoryTracker(), 3)).rejects.toThrow('killed')
    const rest = await run(resumed)
    expect(rest.resumedFrom).toBe(2)
    expect(rest.losses).toEqual(whole.losses.slice(2))
    const last = tracker.rows.filter((r) => r.step === 6)
    const metrics = Object.assign({}, ...last) as Record<string, number>
    expect(metrics['eval/web/loss']).toBeGreaterThan(0)
    expect(metrics['eval/wiki/loss']).toBeGreaterThan(0)
    expect(metrics['eval/wiki/bpb']).toBeCloseTo(metrics['eval/wiki/loss']! / Math.LN2 / 2, 10)
    expect(metrics['data/web/tokens']! + metrics['data/wiki/tokens']!).toBe(6 * 4 * 8)
    expect(metrics['data/web/tokens']).toBe(mixture().consumed(6, 4, 0).web! * 8)
  }, 60_000)

  test("datakit's record Dataset given to a Pipeline is refused, naming the right call", () => {
    const records = { loadParquet: () => undefined } as unknown as Dataset
    expect(
      () => new Pipeline({ dataset: records, model: new Gpt2LM(cfg, 0), trainer: new Trainer({}), maxSteps: 1 }),
    ).toThrow(/dataset has no trainBatch; pass levanter's Dataset.fromDatakit\(tokenCache\)/)
  })
})
