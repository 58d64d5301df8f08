import * as tf from '@tensorflow/tfjs'
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import { createRequire } from 'node:module'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { beforeAll, describe, expect, test } from 'vitest'
import { initBackend, isDeviceBackend } from './backend.js'
import { Dataset } from './data/dataset.js'
import { LocalEngine } from './engine.js'
import { Gpt2LM } from './models/lm.js'
import { AdamW, AdamWConfig, globalNorm } from './optim/adamw.js'
import { DeviceAdamW } from './optim/adamw-device.js'
import { LrSchedule, learningRateAt } from './optim/schedule.js'
import { Pipeline } from './pipeline.js'
import { MemoryTracker } from './trackers.js'
import { flattenGrads } from './train-step.js'
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
    const a = await d.trainBatch(5, 4, 8, 1),
      b = await dataset().trainBatch(5, 4, 8, 1),
      c = await d.trainBatch(6, 4, 8, 1)
    expect(a.inputs).toEqual(b.inputs)
    expect(a.inputs).not.toEqual(c.inputs)
    expect(Array.from(a.targets.subarray(0, 7))).toEqual(Array.from(a.inputs.subarray(1, 8)))
  })

  test('padding and end-of-document positions are masked', async () => {
    const d = Dataset.fromTokens([5, 6, 0, 7, 8, 9, 9, 9, 9], { evalFraction: 0, padId: 9, eosId: 0 })
    const b = await d.trainBatch(0, 1, 8, 0)
    // predicting EOS kept; from EOS masked; pad targets masked
    expect(Array.from(b.mask)).toEqual([1, 1, 0, 1, 0, 0, 0, 0])
  })

  test('AdamW: weight decay is decoupled and skips norms and biases', () => {
    const m = new Gpt2LM(cfg, 0)
    const e = new LocalEngine(m, AdamWConfig.parse({ weightDecay: 0.5 }))
    const before = m.param('transformer.h.0.mlp.c_fc.weight').dataSync()[0]!,
      ln = m.param('transformer.ln_f.weight').dataSync()[0]!
    const zeros = new Map([...m.params].map(([k, v]) => [k, tf.zerosLike(v) as tf.Tensor]))
    e.opt.apply(zeros, 0.1)
    expect(m.param('transformer.h.0.mlp.c_fc.weight').dataSync()[0]!).toBeCloseTo(before * (1 - 0.05), 6)
    expect(m.param('transformer.ln_f.weight').dataSync()[0]!).toBe(ln)
  })

  test("the one-process engine takes its backend's capabilities (CPU: host AdamW, no deferred steps)", async () => {
    const m = new Gpt2LM(cfg, 0)
    const e = new LocalEngine(m, AdamWConfig.parse({}))
    const device = isDeviceBackend()
    expect(e.opt).toBeInstanceOf(device ? DeviceAdamW : AdamW)
    expect([typeof e.stepDeferred, typeof e.readPending]).toEqual(
      device ? ['function', 'function'] : ['undefined', 'undefined'],
    )
    const r = await e.step(await dataset().trainBatch(0, 4, 8, 0), 1e-2)
    expect(Number.isFinite(r.loss) && Number.isFinite(r.gradNorm)).toBe(true)
    // bytes are counted on a device only: the batch up (12 bytes a token), the loss and norm back
    expect([e.reads, e.transferred.toDevice, e.transferred.toHost]).toEqual(device ? [1, 12 * 4 * 8, 8] : [0, 0, 0])
    await e.close()
    m.dispose()
  })

  test('AdamW without decay or clipping equals stock tf.train.adam over several steps', () => {
    const m = new Gpt2LM(cfg, 1)
    const ref = new Gpt2LM(cfg, 1)
    const ours = new AdamW(AdamWConfig.parse({ weightDecay: 0, maxGradNorm: null, beta2: 0.95 }), m)
    const stock = tf.train.adam(0.01, 0.9, 0.95, 1e-8)
    for (let step = 0; step < 4; step++) {
      const grads = new Map(
        [...m.params].map(([k, v], i) => [
          k,
          tf.randomNormal(v.shape, 0, 1 + step, 'float32', 10 * step + i) as tf.Tensor,
        ]),
      )
      const norm = ours.apply(grads, 0.01)
      expect(norm).toBeCloseTo(globalNorm(grads.values()), 2)
      stock.applyGradients([...ref.params].map(([k, v]) => ({ name: v.name, tensor: grads.get(k)! })))
      tf.dispose([...grads.values()])
    }
    for (const [k, v] of m.params) {
      const a = v.dataSync(),
        b = ref.param(k).dataSync()
      a.forEach((x, i) => expect(Math.abs(x - b[i]!), k).toBeLessThan(1e-6))
    }
    stock.dispose()
  })

  test(
    'AdamW updating parameters in place: matMuls after the update ' +
      'see the new weights, not a cached packing of the old',
    () => {
      const m = new Gpt2LM(cfg, 3)
      const opt = new AdamW(AdamWConfig.parse({}), m)
      const name = 'transformer.h.0.mlp.c_fc.weight'
      const w = m.param(name)
      const x = tf.randomNormal([4, w.shape[0]!], 0, 1, 'float32', 5)
      for (let step = 0; step < 3; step++) {
        tf.tidy(() => tf.matMul(x, w).dataSync()) // the backend may cache w, packed, by its id
        const grads = new Map(
          [...m.params].map(([k, v], i) => [k, tf.randomNormal(v.shape, 0, 1, 'float32', 100 * step + i) as tf.Tensor]),
        )
        opt.apply(grads, 0.05)
        tf.dispose([...grads.values()])
        const [got, want] = tf.tidy(() => [
          tf.matMul(x, w).dataSync(),
          tf.matMul(x, tf.tensor(w.dataSync(), w.shape)).dataSync(),
        ])
        got!.forEach((g, i) => expect(Math.abs(g - want![i]!)).toBeLessThan(1e-4))
      }
      x.dispose()
    },
  )

  test('AdamW clips by the global norm and applies the same update from a flat buffer', async () => {
    const a = new Gpt2LM(cfg, 2),
      b = new Gpt2LM(cfg, 2)
    const oa = new AdamW(AdamWConfig.parse({ maxGradNorm: 0.5 }), a),
      ob = new AdamW(AdamWConfig.parse({ maxGradNorm: 0.5 }), b)
    const grads = new Map(
      [...a.params].map(([k, v], i) => [k, tf.randomNormal(v.shape, 0, 1, 'float32', i) as tf.Tensor]),
    )
    const names = [...a.params.keys()]
    const norm = oa.apply(grads, 0.01)
    expect(norm).toBeGreaterThan(0.5)
    expect(ob.applyFlat(flattenGrads(grads, names), 0.01)).toBe(norm)
    for (const k of names) expect(a.param(k).dataSync()).toEqual(b.param(k).dataSync())
    expect(await oa.state()).toEqual(await ob.state())
    // Clipped to norm 0.5: the first step of Adam moves each weight by about lr regardless, so compare the moments.
    const m = (await oa.state()).get(`m.${names[0]}`)!,
      g = grads.get(names[0]!)!.dataSync()
    m.forEach((x, i) => expect(x).toBeCloseTo(0.1 * g[i]! * (0.5 / norm), 6))
    tf.dispose([...grads.values()])
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

  test('pipeline trains: loss falls, metrics and eval (bits per byte) reach the trackers', async () => {
    const tracker = new MemoryTracker()
    const trainer = new Trainer(
      { learningRate: 1e-2, batchSize: 4, logEvery: 5, evalEvery: 20, evalBatches: 1, schedule: { warmupSteps: 2 } },
      { trackers: [tracker] },
    )
    const r = await new Pipeline({ dataset: dataset(), model: new Gpt2LM(cfg, 0), trainer, maxSteps: 40 }).run()
    expect(r.losses).toHaveLength(40)
    expect(r.losses.slice(-5).reduce((a, b) => a + b) / 5).toBeLessThan(r.losses[0]! * 0.7)
    const ev = tracker.rows.filter((x) => 'eval/loss' in x)
    expect(ev.map((x) => x.step)).toEqual([20, 40])
    expect(ev[1]!['eval/bpb']).toBeCloseTo(ev[1]!['eval/loss']! / Math.LN2, 6)
    const train = tracker.rows.filter((x) => 'train/loss' in x)
    expect(train.map((x) => x.step)).toEqual([5, 10, 15, 20, 25, 30, 35, 40])
    expect(train[0]!['throughput/tokens_per_sec']).toBeGreaterThan(0)
    expect(train[0]!['throughput/mfu']).toBeGreaterThan(0)
  })

  test('no tensor leaks: live tensors and bytes after step 1000 equal ' +
    'those after step 10 (with eval, logging and checkpoints on the way)', async () => {
    // 1000 real steps, as the contract says. A step of a model this small is ~500 kernel
    // dispatches (a few ms on an idle core), so this takes seconds alone and a minute at most
    // on a machine loaded many times over: hence the longer timeout, and nothing smaller to wait on.
    const tiny = { vocabSize: 11, seqLen: 4, dModel: 8, nLayers: 1, nHeads: 2 }
    const store = fs.mkdtempSync(path.join(os.tmpdir(), 'lev-leak-'))
    const mem = new Map<number, { numTensors: number; numBytes: number }>()
    const trainer = new Trainer(
      {
        learningRate: 1e-2,
        batchSize: 2,
        logEvery: 100,
        evalEvery: 250,
        evalBatches: 1,
        checkpointEvery: 500,
        checkpointStore: store,
        runName: 'leak',
      },
      { trackers: [new MemoryTracker()] },
    ).addHook(1, (info) => {
      if (info.step === 10 || info.step === 1000) {
        const m = tf.memory()
        mem.set(info.step, { numTensors: m.numTensors, numBytes: m.numBytes })
      }
    })
    const r = await new Pipeline({ dataset: dataset(), model: new Gpt2LM(tiny, 0), trainer, maxSteps: 1000 }).run()
    expect(r.losses).toHaveLength(1000)
    expect(mem.get(10)!.numTensors).toBeGreaterThan(0)
    expect(mem.get(1000)).toEqual(mem.get(10))
  }, 120_000)

  test('JSONL is the default tracker', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lev-jsonl-'))
    await new Pipeline({
      dataset: dataset(),
      model: new Gpt2LM(cfg, 0),
      trainer: new Trainer({ batchSize: 2, logEvery: 1, runDir: dir }),
      maxSteps: 2,
    }).run()
    const lines = fs
      .readFileSync(path.join(dir, 'metrics.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l))
    expect(lines.map((l) => l.step)).toEqual([1, 2])
  })

  test('a bare Pipeline shows progress, keeps metrics under the Marin prefix, prints no tfjs banner', async () => {
    const prefix = fs.mkdtempSync(path.join(os.tmpdir(), 'lev-bare-'))
    const child = fileURLToPath(new URL('./test-support/bare-run.ts', import.meta.url))
    const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href
    const r = spawnSync(process.execPath, ['--import', tsx, child], {
      cwd: prefix,
      env: { ...process.env, MARIN_PREFIX: path.join(prefix, 'marin'), LOG_LEVEL: 'info' },
      encoding: 'utf8',
    })
    expect(r.status, r.stderr).toBe(0)
    const lines = r.stderr.split('\n').filter((l) => l.includes('"msg":"training"'))
    expect(
      lines.map((l) => JSON.parse(l).step),
      r.stderr,
    ).toEqual([2, 4])
    expect(JSON.parse(lines[1]!)).toMatchObject({ of: 4, loss: expect.any(Number), eta: '0s' })
    expect(fs.existsSync(path.join(prefix, 'marin', 'levanter-runs', 'bare', 'metrics.jsonl'))).toBe(true)
    expect(fs.existsSync(path.join(prefix, 'levanter-runs'))).toBe(false)
    // tfjs's banner (it asks for tfjs-node) is not printed: levanter sets PROD before the first tensor
    expect(r.stderr).not.toMatch(/looks like you are running TensorFlow\.js/)
  }, 60_000)

  test('bad trainer config names the field', () => {
    expect(() => new Trainer({ learningRate: -1 })).toThrow(/learningRate/)
    expect(() => new Trainer({ batchSize: 3, mesh: { data: 2 } })).toThrow(
      /batchSize 3 must be a multiple of mesh.data 2/,
    )
  })
})
