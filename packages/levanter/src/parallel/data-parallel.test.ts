import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { LocalClient, withClient } from '@marin/fray'
import { beforeAll, describe, expect, test } from 'vitest'
import { initBackend } from '../backend.js'
import { Checkpointer } from '../checkpoint/checkpointer.js'
import { Dataset } from '../data/dataset.js'
import { isLevanterError } from '../errors.js'
import { Gpt2LM } from '../models/lm.js'
import { Pipeline } from '../pipeline.js'
import { MemoryTracker } from '../trackers.js'
import { Trainer } from '../trainer.js'
import { MeshEngine } from './mesh-engine.js'
import type { StepRecord } from './step-record.js'

const cfg = { vocabSize: 11, seqLen: 8, dModel: 16, nLayers: 1, nHeads: 2 }
const MESH = { data: 2, model: 1 }
const tokens = Array.from({ length: 1500 }, (_, i) => ((i * 3) % 10) + (i % 23 === 0 ? 1 : 0))

beforeAll(async () => {
  await initBackend()
})

describe('data parallel: the mesh engine at { data: 2 } (model 1)', () => {
  test('2 replicas match single-process training on the same global batch over 20 steps', async () => {
    const run = async (mesh?: { data: number }) => {
      const model = new Gpt2LM(cfg, 2)
      const trainer = new Trainer(
        { learningRate: 1e-2, batchSize: 4, seed: 1, ...(mesh ? { mesh } : {}) },
        { trackers: [new MemoryTracker()] },
      )
      const pipeline = new Pipeline({
        dataset: Dataset.fromTokens(tokens, { evalFraction: 0 }),
        model,
        trainer,
        maxSteps: 20,
      })
      const replicaTensors: number[][] = []
      let phases: StepRecord[][] = []
      trainer.addHook(5, async (info) => {
        if (!mesh) return
        const group = (pipeline.engine as MeshEngine).group
        replicaTensors.push((await group.broadcast.memory()).map((m) => m.numTensors))
        if (info.step === 20) phases = await group.broadcast.phases()
      })
      const r = await pipeline.run()
      return { losses: r.losses, weights: await model.weights(), replicaTensors, phases }
    }
    const single = await run(),
      dp = await run({ data: 2 })
    // Replicas hold steady too, and account for every step's phases.
    expect(dp.replicaTensors).toHaveLength(4)
    expect(dp.replicaTensors[3]).toEqual(dp.replicaTensors[0])
    expect(dp.phases.map((p) => p.length)).toEqual([20, 20])
    for (const p of dp.phases.flat())
      expect(Math.min(p.grads, p.flatten, p.dataReduce, p.apply, p.cpu)).toBeGreaterThanOrEqual(0)
    expect(dp.losses).toHaveLength(20)
    dp.losses.forEach((l, i) => expect(Math.abs(l - single.losses[i]!)).toBeLessThan(1e-4))
    for (const [n, w] of single.weights) {
      const d = dp.weights.get(n)!
      for (let i = 0; i < w.length; i++) expect(Math.abs(d[i]! - w[i]!)).toBeLessThan(1e-3)
    }
  }, 90_000)

  test('a dead replica fails the step with a clear error and leaves the last checkpoint intact', async () => {
    const store = fs.mkdtempSync(path.join(os.tmpdir(), 'lev-dp-'))
    const trainer = new Trainer(
      {
        learningRate: 1e-2,
        batchSize: 4,
        mesh: { data: 2 },
        checkpointStore: store,
        checkpointEvery: 1,
        runName: 'dp',
      },
      { trackers: [new MemoryTracker()] },
    )
    const pipeline = new Pipeline({
      dataset: Dataset.fromTokens(tokens, { evalFraction: 0 }),
      model: new Gpt2LM(cfg, 2),
      trainer,
      maxSteps: 10,
    })
    trainer.addHook(3, () => {
      process.kill((pipeline.engine as MeshEngine).pids[1]!, 'SIGKILL')
    })
    await expect(pipeline.run()).rejects.toSatisfy(
      (e) =>
        isLevanterError(e, 'REPLICA_FAILED') &&
        /replicas? (0, )?1 of 2 failed.*resume from the last checkpoint/.test((e as Error).message),
    )
    const ck = await Checkpointer.open({ store, run: 'dp' })
    expect(await ck.steps()).toEqual([2, 3])
    const last = await ck.load()
    expect(last!.manifest.step).toBe(3)
    expect(last!.tensors.weights.get('transformer.wte.weight')!.length).toBe(11 * 16)
    ck.close()
  }, 60_000)

  test('gradients all-reduced in buckets during the backward pass: the bits of one all-reduce after it', async () => {
    const adamw = { beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1, maxGradNorm: 1 }
    const dataset = Dataset.fromTokens(tokens, { evalFraction: 0 })
    const run = async (overlapReduce: boolean) => {
      const model = new Gpt2LM({ ...cfg, nLayers: 3 }, 2)
      // small buckets: several per step
      const engine = await MeshEngine.create(model, adamw, { mesh: MESH, overlapReduce, bucketBytes: 2048 })
      model.dispose()
      try {
        const results = []
        for (let s = 0; s < 5; s++) results.push(await engine.step(await dataset.trainBatch(s, 4, cfg.seqLen, 1), 1e-2))
        return { results, state: await engine.state(), phases: (await engine.group.broadcast.phases()).flat() }
      } finally {
        await engine.close()
      }
    }
    const after = await run(false),
      overlapped = await run(true)
    expect(overlapped.results).toEqual(after.results) // losses and gradient norms, bit for bit
    for (const [n, w] of after.state.weights) expect(overlapped.state.weights.get(n)).toEqual(w)
    for (const [n, m] of after.state.optimizer) expect(overlapped.state.optimizer.get(n)).toEqual(m)
    // One collective after the backward pass, against several started while it ran (all but the
    // last: the tied embedding's gradient is complete only when the pass ends).
    for (const p of after.phases) expect([p.buckets, p.bucketsDuringBackward]).toEqual([1, 0])
    for (const p of overlapped.phases) {
      expect(p.buckets).toBeGreaterThanOrEqual(4)
      expect(p.bucketsDuringBackward).toBe(p.buckets - 1)
    }
  }, 90_000)

  test('replicas in one process (inline) reduce buckets during their backward passes: the same bits', async () => {
    // Both passes await between nodes in one tfjs engine: each must keep its own tensors.
    const client = new LocalClient({ mode: 'inline' })
    const adamw = { beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1, maxGradNorm: 1 }
    const dataset = Dataset.fromTokens(tokens, { evalFraction: 0 })
    const run = async (overlapReduce: boolean) => {
      const model = new Gpt2LM({ ...cfg, nLayers: 3 }, 2)
      const engine = await withClient(client, () =>
        MeshEngine.create(model, adamw, { mesh: MESH, overlapReduce, bucketBytes: 2048 }),
      )
      model.dispose()
      try {
        const results = []
        for (let s = 0; s < 3; s++) results.push(await engine.step(await dataset.trainBatch(s, 4, cfg.seqLen, 1), 1e-2))
        return { results, phases: (await engine.group.broadcast.phases()).flat() }
      } finally {
        await engine.close()
      }
    }
    try {
      const after = await run(false),
        overlapped = await run(true)
      expect(overlapped.results).toEqual(after.results)
      for (const p of overlapped.phases) expect(p.bucketsDuringBackward).toBeGreaterThan(0)
    } finally {
      await client.shutdown()
    }
  }, 90_000)
})
