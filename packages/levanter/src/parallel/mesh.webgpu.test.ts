/**
 * Mesh members on webgpu (SwiftShader where there is no GPU): fsdp over `{ data: 2 }` and tensor
 * parallel over `{ model: 2 }` train as one webgpu process does. The members read every tensor
 * asynchronously (a synchronous read of a GPU tensor throws on this backend, webgpu/backend.ts).
 * They run inline, in this process, so the shaders of the one model shape compile once.
 */
import { LocalClient, withClient } from '@marin/fray'
import * as tf from '@tensorflow/tfjs'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { initBackend } from '../backend.js'
import { Dataset } from '../data/dataset.js'
import type { Batch } from '../data/batch.js'
import { LocalEngine } from '../engine.js'
import type { StepResult, TrainTensors } from '../engine.js'
import { createModel } from '../models/lm.js'
import { AdamWConfig } from '../optim/adamw.js'
import { MeshEngine } from './mesh-engine.js'

/** The smallest model with every part that splits over two model members: SwiftShader is slow. */
const SMALL = { type: 'llama', vocabSize: 16, seqLen: 8, dModel: 8, nLayers: 1, nHeads: 2 } as const
const TOKENS = Array.from({ length: 2000 }, (_, i) => (i * 7) % 15)
const adamw = AdamWConfig.parse({})
const client = new LocalClient({ mode: 'inline' })
let batches: Batch[]
let single: { results: StepResult[]; state: TrainTensors }

beforeAll(async () => {
  await initBackend('webgpu')
  const data = Dataset.fromTokens(TOKENS, { evalFraction: 0 })
  batches = await Promise.all([0, 1, 2].map((s) => data.trainBatch(s, 4, SMALL.seqLen, 0)))
  const engine = new LocalEngine(createModel(SMALL, 2), adamw)
  const results: StepResult[] = []
  for (const b of batches) results.push(await engine.step(b, 1e-2))
  single = { results, state: await engine.state() }
  await engine.close()
  engine.model.dispose()
}, 120_000)
afterAll(() => client.shutdown())

test.each([
  { layout: 'data 2 fsdp', mesh: { data: 2, model: 1 }, fsdp: true },
  { layout: 'model 2', mesh: { data: 1, model: 2 }, fsdp: false },
])(
  '$layout on webgpu matches one webgpu process within 1e-4',
  async ({ mesh, fsdp }) => {
    expect(tf.getBackend()).toBe('webgpu')
    const model = createModel(SMALL, 2)
    const engine = await withClient(client, () => MeshEngine.create(model, adamw, { mesh, fsdp }))
    model.dispose()
    try {
      const got: StepResult[] = []
      for (const b of batches) got.push(await engine.step(b, 1e-2))
      got.forEach((r, i) => {
        expect(Math.abs(r.loss - single.results[i]!.loss), `loss, step ${i + 1}`).toBeLessThan(1e-4)
        expect(Math.abs(r.gradNorm - single.results[i]!.gradNorm), `gradient norm, step ${i + 1}`).toBeLessThan(1e-4)
      })
      const state = await engine.state()
      expect(state.count).toBe(batches.length)
      expect([...state.weights.keys()].sort()).toEqual([...single.state.weights.keys()].sort())
      for (const [name, w] of single.state.weights) {
        const v = state.weights.get(name)!
        let worst = 0
        for (let i = 0; i < w.length; i++) worst = Math.max(worst, Math.abs(v[i]! - w[i]!))
        expect(worst, `weights of ${name}`).toBeLessThan(1e-4)
      }
    } finally {
      await engine.close()
    }
  },
  120_000,
)
