/**
 * A model one process cannot train (its parameters and gradients alone overflow the 4 GiB wasm
 * heap) fails there with OUT_OF_MEMORY, and trains sharded over 2 and 4 processes, the members
 * drawing only their parts of the initial weights (the driver never holds the model).
 */
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { LocalClient, withClient } from '@marin/fray'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { initBackend } from '../backend.js'
import { Dataset } from '../data/dataset.js'
import { BIG_MODEL, BIG_TOKENS } from '../test-support/big-model-child.js'
import { ModelConfig } from '../models/config.js'
import { createModel, specsOf } from '../models/lm.js'
import { coordsOfRank, cutForMember, fsdpShard, initialPart, localParams } from './layout.js'
import type { MeshShape } from './layout.js'
import { MeshEngine } from './mesh-engine.js'

const child = fileURLToPath(new URL('../test-support/big-model-child.ts', import.meta.url))
const ADAMW = { beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1, maxGradNorm: 1 }
const GiB = 2 ** 30
// Members as real processes: each has its own wasm heap.
const client = new LocalClient()

beforeAll(async () => {
  await initBackend()
})
afterAll(() => client.shutdown())

test('one process cannot train it: OUT_OF_MEMORY naming the model size and the sharded layouts', async () => {
  const p = spawn(process.execPath, ['--import', 'tsx', child], {
    stdio: ['ignore', 'pipe', 'ignore'],
    env: { ...process.env, LEVANTER_BACKEND: 'wasm' },
  })
  let out = ''
  p.stdout.on('data', (d: Buffer) => (out += d.toString()))
  const code = await new Promise((r) => p.once('exit', r))
  expect(code).toBe(0)
  const line = JSON.parse(out.trim().split('\n').at(-1)!) as { ok: boolean; code?: string; message?: string }
  expect(line.ok).toBe(false)
  expect(line.code).toBe('OUT_OF_MEMORY')
  expect(line.message).toMatch(/554\.1M parameters/)
  expect(line.message).toMatch(/4 GiB wasm heap/)
  expect(line.message).toMatch(/fsdp: true/)
  expect(line.message).toMatch(/mesh: \{ model: 2 \}/)
}, 240_000)

type Run = { losses: number[]; gradNorm: number; heapBytes: number[]; ownedBytes: number[] }

/**
 * One step on the global batch of step 0 (2 sequences), then the loss of the updated model on the
 * batch of step 1: the losses a run reports at steps 1 and 2, without step 2's backward pass.
 */
async function train(mesh: MeshShape): Promise<Run> {
  const dataset = Dataset.fromTokens(BIG_TOKENS, { evalFraction: 0 })
  const batch = (s: number) => dataset.trainBatch(s, 2, BIG_MODEL.seqLen!, 1)
  const engine = await withClient(client, () => MeshEngine.init(BIG_MODEL, 0, ADAMW, { mesh, fsdp: true }))
  try {
    const first = await engine.step(await batch(0), 1e-2)
    const second = await engine.evalLoss(await batch(1))
    const mem = await engine.group.broadcast.memory()
    return {
      losses: [first.loss, second],
      gradNorm: first.gradNorm,
      heapBytes: mem.map((m) => m.heapBytes),
      ownedBytes: mem.map((m) => m.ownedBytes),
    }
  } finally {
    await engine.close()
  }
}

test('it trains under fsdp on { data: 2 } and on { data: 2, model: 2 }, with equal losses and gradient norms', async () => {
  const params = 554_092_544
  const dp = await train({ data: 2, model: 1 })
  // Each member owns half of every parameter and of its moments, and its heap holds one stage at a time.
  for (const b of dp.ownedBytes) expect(Math.abs(b - (12 * params) / 2)).toBeLessThan(12 * 1000)
  for (const b of dp.heapBytes) expect(b).toBeLessThan(1.5 * GiB)
  const tp = await train({ data: 2, model: 2 })
  expect(tp.ownedBytes).toHaveLength(4)
  for (const b of tp.ownedBytes) expect(b).toBeLessThan((12 * params) / 3)
  // It learns: the updated model's loss is below the first step's.
  expect(dp.losses[1]!).toBeLessThan(dp.losses[0]! - 0.1)
  dp.losses.forEach((l, i) => expect(Math.abs(l - tp.losses[i]!)).toBeLessThan(1e-4))
  expect(Math.abs(dp.gradNorm - tp.gradNorm) / dp.gradNorm).toBeLessThan(1e-4)
}, 900_000)

test.each([
  { mesh: { data: 2, model: 1 }, fsdp: true },
  { mesh: { data: 1, model: 2 }, fsdp: false },
  { mesh: { data: 3, model: 2 }, fsdp: true },
  { mesh: { data: 2, model: 2 }, fsdp: false },
])('members draw exactly their parts of createModel(config, seed): $mesh fsdp $fsdp', ({ mesh, fsdp }) => {
  for (const config of [
    { type: 'gpt2', vocabSize: 13, seqLen: 8, dModel: 16, nLayers: 2, nHeads: 4 },
    { type: 'llama', vocabSize: 13, seqLen: 8, dModel: 16, nLayers: 1, nHeads: 4, nKvHeads: 2 },
  ] as const) {
    const model = createModel(config, 7)
    const full = { weights: new Map([...model.params].map(([n, p]) => [n, p.dataSync() as Float32Array])) }
    model.dispose()
    const specs = specsOf(config)
    const layout = localParams(ModelConfig.parse(config), specs, mesh, fsdp)
    for (let rank = 0; rank < mesh.data * mesh.model; rank++) {
      const cut = cutForMember({ ...full, optimizer: new Map(), count: 0 }, layout, mesh, fsdp, rank)
      layout.forEach((lp, i) => {
        const part = cut.weights.get(lp.name)!
        expect(initialPart(specs[i]!, lp, mesh, rank, 7, false)).toEqual(part)
        if (fsdp) {
          const { data } = coordsOfRank(mesh, rank)
          expect(initialPart(specs[i]!, lp, mesh, rank, 7, true)).toEqual(fsdpShard(part, mesh.data, data))
        }
      })
    }
  }
})
