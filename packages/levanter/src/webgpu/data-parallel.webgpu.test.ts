/**
 * Data-parallel replicas (the mesh engine at `{ data: 2 }`) under a webgpu driver run on webgpu
 * (SwiftShader where there is no GPU): each computes its gradients on the device, reads them back
 * as one flat tensor once a step, all-reduces them over the mesh, uploads the sum once, and
 * applies AdamW on the device. The driver chooses webgpu as `LEVANTER_BACKEND=webgpu` asks (its replicas inherit the
 * variable); default-selection.test.ts trains replicas and fsdp members under a driver that chose it by default.
 */
import { afterAll, beforeAll, expect, test } from 'vitest'
import { initBackend } from '../backend.js'
import { Dataset } from '../data/dataset.js'
import { LocalEngine } from '../engine.js'
import type { StepResult } from '../engine.js'
import { createModel } from '../models/lm.js'
import { AdamWConfig } from '../optim/adamw.js'
import { MeshEngine } from '../parallel/mesh-engine.js'
import { TINY_BATCH, TINY_MODELS, TINY_TOKENS } from '../test-support/backend-train.js'

/** The tiny Llama (every matrix dimension 16): SwiftShader is slow, compiling each distinct product most of all, and
 * each replica (batches of one sequence) compiles three. */
const SMALL = TINY_MODELS.llama
const BATCH = 2 * TINY_BATCH.batchSize

const before = process.env.LEVANTER_BACKEND
beforeAll(async () => {
  process.env.LEVANTER_BACKEND = 'webgpu'
  expect((await initBackend()).name).toBe('webgpu')
}, 120_000)
afterAll(() => {
  if (before === undefined) delete process.env.LEVANTER_BACKEND
  else process.env.LEVANTER_BACKEND = before
})

test('2 replicas on webgpu match one webgpu process; each reads its flat gradient once a step', async () => {
  const adamw = AdamWConfig.parse({})
  const data = Dataset.fromTokens(TINY_TOKENS, { evalFraction: 0 })
  const batches = await Promise.all([0, 1, 2].map((s) => data.trainBatch(s, BATCH, TINY_BATCH.seqLen, 0)))
  // The replicas start (their own processes) while this process trains the reference.
  const model = createModel(SMALL, 2)
  const params = model.numParams()
  const starting = MeshEngine.create(model, adamw, { mesh: { data: 2, model: 1 } }).finally(() => model.dispose())
  starting.catch(() => {})
  const single = new LocalEngine(createModel(SMALL, 2), adamw)
  const one: StepResult[] = []
  for (const b of batches) one.push(await single.step(b, 1e-2))
  await single.close()
  single.model.dispose()

  const engine = await starting
  try {
    const dp: StepResult[] = []
    const tensors: number[][] = []
    for (const b of batches) {
      dp.push(await engine.step(b, 1e-2))
      tensors.push((await engine.group.broadcast.memory()).map((m) => m.numTensors))
    }
    expect(tensors[2]).toEqual(tensors[0]) // no tensor left behind by a step
    expect(await engine.group.broadcast.backend()).toEqual(['webgpu', 'webgpu'])
    dp.forEach((r, i) => {
      expect(Math.abs(r.loss - one[i]!.loss), `loss, step ${i + 1}`).toBeLessThan(1e-4)
      expect(Math.abs(r.gradNorm - one[i]!.gradNorm), `gradient norm, step ${i + 1}`).toBeLessThan(1e-4)
    })
    const phases = await engine.group.broadcast.phases()
    expect(phases.map((p) => p.length)).toEqual([3, 3])
    for (const p of phases.flat()) {
      // one read a step: every gradient and the loss, float32
      expect(p.transfer!.reads).toBe(1)
      expect(p.transfer!.toHost).toBe(4 * (params + 1))
      // the summed gradient, and this replica's half of the batch (ids, targets, mask: 12 bytes a token)
      expect(p.transfer!.toDevice).toBe(4 * params + 12 * (BATCH / 2) * TINY_BATCH.seqLen)
    }
    const read = phases[0]![0]!.transfer!.toHost
    console.log(`data-parallel on webgpu: ${params} parameters, ${read} bytes read per step per replica`)
  } finally {
    await engine.close()
  }
}, 300_000)
