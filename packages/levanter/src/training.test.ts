import * as tf from '@tensorflow/tfjs'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { beforeAll, describe, expect, test } from 'vitest'
import { initBackend } from './backend.js'
import { Dataset } from './data/dataset.js'
import { LocalEngine } from './engine.js'
import { Gpt2LM } from './models/lm.js'
import { AdamWConfig } from './optim/adamw.js'
import { LrSchedule, learningRateAt } from './optim/schedule.js'
import { Pipeline } from './pipeline.js'
import { MemoryTracker } from './trackers.js'
import { Trainer } from './trainer.js'

const cfg = { vocabSize: 11, seqLen: 8, dModel: 16, nLayers: 1, nHeads: 2 }
// A learnable stream: a repeating pattern with a little noise, 1 byte per token.
const tokens = Array.from({ length: 2000 }, (_, i) => ((i * 7) % 10) + (i % 97 === 0 ? 1 : 0))
const dataset = () => Dataset.fromTokens(tokens, { evalFraction: 0.1, numBytes: tokens.length })

beforeAll(async () => {
  await initBackend()
})

describe('schedules', () => {
  test('warmup, then cosine/linear/constant down to the minimum ratio', () => {
    const s = (decay: 'cosine' | 'linear' | 'constant') => LrSchedule.parse({ decay, warmupSteps: 10, minLrRatio: 0.1 })
    expect(learningRateAt(s('cosine'), 1, 0, 110)).toBeCloseTo(0.1)
    expect(learningRateAt(s('cosine'), 1, 9, 110)).toBeCloseTo(1)
    expect(learningRateAt(s('cosine'), 1, 60, 110)).toBeCloseTo(0.55)
    expect(learningRateAt(s('cosine'), 1, 110, 110)).toBeCloseTo(0.1)
    expect(learningRateAt(s('linear'), 1, 60, 110)).toBeCloseTo(0.55)
    expect(learningRateAt(s('linear'), 1, 35, 110)).toBeCloseTo(0.775)
    expect(learningRateAt(s('constant'), 1, 100, 110)).toBe(1)
  })
})

describe('training', () => {
  test('batches are a pure function of (seed, step), and differ across steps', async () => {
    const d = dataset()
    const a = await d.trainBatch(5, 4, 8, 1), b = await dataset().trainBatch(5, 4, 8, 1), c = await d.trainBatch(6, 4, 8, 1)
    expect(a.inputs).toEqual(b.inputs)
    expect(a.inputs).not.toEqual(c.inputs)
    expect(Array.from(a.targets.subarray(0, 7))).toEqual(Array.from(a.inputs.subarray(1, 8)))
  })

  test('padding and end-of-document positions are masked', async () => {
    const d = Dataset.fromTokens([5, 6, 0, 7, 8, 9, 9, 9, 9], { evalFraction: 0, padId: 9, eosId: 0 })
    const b = await d.trainBatch(0, 1, 8, 0)
    expect(Array.from(b.mask)).toEqual([1, 1, 0, 1, 0, 0, 0, 0]) // predicting EOS kept; from EOS masked; pad targets masked
  })

  test('AdamW: weight decay is decoupled and skips norms and biases', () => {
    const m = new Gpt2LM(cfg, 0)
    const e = new LocalEngine(m, AdamWConfig.parse({ weightDecay: 0.5 }))
    const before = m.param('transformer.h.0.mlp.c_fc.weight').dataSync()[0]!, ln = m.param('transformer.ln_f.weight').dataSync()[0]!
    const zeros = new Map([...m.params].map(([k, v]) => [k, tf.zerosLike(v) as tf.Tensor]))
    e.opt.apply(zeros, 0.1)
    expect(m.param('transformer.h.0.mlp.c_fc.weight').dataSync()[0]!).toBeCloseTo(before * (1 - 0.05), 6)
    expect(m.param('transformer.ln_f.weight').dataSync()[0]!).toBe(ln)
  })

  test('gradient accumulation over microbatches matches one pass', async () => {
    const b = await dataset().trainBatch(0, 4, 8, 0)
    const run = async (micro: number) => {
      const e = new LocalEngine(new Gpt2LM(cfg, 3), AdamWConfig.parse({}), micro)
      const r = [await e.step(b, 1e-2), await e.step(b, 1e-2)]
      return r
    }
    const [one, two] = [await run(1), await run(2)]
    for (let i = 0; i < 2; i++) {
      expect(two[i]!.loss).toBeCloseTo(one[i]!.loss, 5)
      expect(two[i]!.gradNorm).toBeCloseTo(one[i]!.gradNorm, 4)
    }
  })

  test('pipeline trains: loss falls, metrics and eval (bits per byte) reach the trackers, no tensor leaks', async () => {
    const tracker = new MemoryTracker()
    const mem: { numTensors: number; numBytes: number }[] = []
    const trainer = new Trainer(
      { learningRate: 1e-2, batchSize: 4, logEvery: 5, evalEvery: 20, evalBatches: 1, schedule: { warmupSteps: 2 } },
      { trackers: [tracker] },
    ).addHook(1, () => {
      const m = tf.memory()
      mem.push({ numTensors: m.numTensors, numBytes: m.numBytes })
    })
    const r = await new Pipeline({ dataset: dataset(), model: new Gpt2LM(cfg, 0), trainer, maxSteps: 40 }).run()
    expect(r.losses).toHaveLength(40)
    expect(r.losses.slice(-5).reduce((a, b) => a + b) / 5).toBeLessThan(r.losses[0]! * 0.7)
    expect(mem[9]).toEqual(mem[39])
    const ev = tracker.rows.filter((x) => 'eval/loss' in x)
    expect(ev.map((x) => x.step)).toEqual([20, 40])
    expect(ev[1]!['eval/bpb']).toBeCloseTo(ev[1]!['eval/loss']! / Math.LN2, 6)
    const train = tracker.rows.filter((x) => 'train/loss' in x)
    expect(train.map((x) => x.step)).toEqual([5, 10, 15, 20, 25, 30, 35, 40])
    expect(train[0]!['throughput/tokens_per_sec']).toBeGreaterThan(0)
    expect(train[0]!['throughput/mfu']).toBeGreaterThan(0)
  })

  test('JSONL is the default tracker', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lev-jsonl-'))
    await new Pipeline({ dataset: dataset(), model: new Gpt2LM(cfg, 0), trainer: new Trainer({ batchSize: 2, logEvery: 1, runDir: dir }), maxSteps: 2 }).run()
    const lines = fs.readFileSync(path.join(dir, 'metrics.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l))
    expect(lines.map((l) => l.step)).toEqual([1, 2])
  })

  test('bad trainer config names the field', () => {
    expect(() => new Trainer({ learningRate: -1 })).toThrow(/learningRate/)
    expect(() => new Trainer({ batchSize: 3, mesh: { data: 2 } })).toThrow(/batchSize 3 must be a multiple of mesh.data 2/)
  })
})
