/**
 * A model one process cannot train (its parameters and gradients alone overflow its wasm heap)
 * fails there with OUT_OF_MEMORY, and trains sharded over 2 and 4 processes, the members drawing
 * only their parts of the initial weights (the driver never holds the model). Every process the
 * tests start is held to a 64 MiB wasm heap (test-support/held-heap.ts, parallel/heap-limit.ts), so
 * a 10.7 M-parameter model shows what a 554 M-parameter one shows against the whole 4 GiB heap, at a
 * fiftieth of the compute and memory. The references: one process's forward pass (which fits) for
 * the first loss, and the 4-process layout (other code: heads and MLP split, all-reduces between
 * stages) for the loss after the update and the gradient norm.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { createRequire } from 'node:module'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { LocalClient, withClient } from '@marin/fray'
import { machineSlowdown } from '@marin/rigging/net-hosts'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { initBackend } from '../backend.js'
import { Dataset } from '../data/dataset.js'
import { BIG_MODEL, BIG_MODEL_HEAP_MIB, BIG_TOKENS, bigBatch } from '../test-support/big-model-child.js'
import { ModelConfig } from '../models/config.js'
import { createModel, specsOf } from '../models/lm.js'
import { coordsOfRank, cutForMember, fsdpShard, initialPart, localParams } from './layout.js'
import type { MeshShape } from './layout.js'
import { holdWasmHeapTo } from './heap-limit.js'
import { MeshEngine } from './mesh-engine.js'

const child = fileURLToPath(new URL('../test-support/big-model-child.ts', import.meta.url))
const held = new URL('../test-support/held-heap.ts', import.meta.url).href
const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href
const ADAMW = { beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1, maxGradNorm: 1 }
const HEAP = BIG_MODEL_HEAP_MIB * 2 ** 20
/** What test-support/held-heap.ts reads. */
const HELD_HEAP_ENV = 'LEVANTER_TEST_WASM_HEAP_MIB'
/** The in-process draws below take seconds on an idle machine; at load 25 one took 38 s. */
const DRAWS = { timeout: 30_000 * machineSlowdown() }
// Members as real processes: each has its own wasm heap.
const client = new LocalClient()
type Attempt = { initialLoss: number; ok: boolean; code?: string; message?: string }
/** The one-process child's line: the loss of the initial model on the first batch (a forward pass), then the error. */
let oneProcess: Promise<Attempt>

async function attempt(): Promise<Attempt> {
  const p = spawn(process.execPath, ['--import', 'tsx', child], {
    stdio: ['ignore', 'pipe', 'ignore'],
    env: { ...process.env, LEVANTER_BACKEND: 'wasm' },
  })
  children.push(p)
  let out = ''
  p.stdout.on('data', (d: Buffer) => (out += d.toString()))
  const code = await new Promise((r) => p.once('exit', r))
  if (code !== 0) throw new Error(`big-model-child exited ${code}: ${out}`)
  return JSON.parse(out.trim().split('\n').at(-1)!) as Attempt
}

beforeAll(async () => {
  await initBackend()
})
const children: ChildProcess[] = []
afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL')
  await client.shutdown()
})

describe('a model one process cannot train', () => {
  // Every process started from here on (the one-process child, the mesh members) loads the preload.
  const saved = { options: process.env.NODE_OPTIONS, heap: process.env[HELD_HEAP_ENV] }
  beforeAll(() => {
    process.env.NODE_OPTIONS = [saved.options, `--import ${tsx} --import ${held}`].filter(Boolean).join(' ')
    process.env[HELD_HEAP_ENV] = String(BIG_MODEL_HEAP_MIB)
    // The one-process attempt runs beside the first sharded run (the tests read its line).
    oneProcess = attempt()
    oneProcess.catch(() => {})
  })
  afterAll(() => {
    for (const [k, v] of [
      ['NODE_OPTIONS', saved.options],
      [HELD_HEAP_ENV, saved.heap],
    ] as const)
      if (v === undefined) delete process.env[k]
      else process.env[k] = v
  })

  type Run = { losses: number[]; gradNorm: number; heapBytes: number[]; ownedBytes: number[] }

  /**
   * One step on the global batch of step 0 (2 sequences), then the loss of the updated model on the
   * batch of step 1: the losses a run reports at steps 1 and 2, without step 2's backward pass.
   */
  async function train(mesh: MeshShape): Promise<Run> {
    const dataset = Dataset.fromTokens(BIG_TOKENS, { evalFraction: 0 })
    const engine = await withClient(client, () => MeshEngine.init(BIG_MODEL, 0, ADAMW, { mesh, fsdp: true }))
    try {
      const first = await engine.step(await bigBatch(dataset, 0), 1e-4)
      const second = await engine.evalLoss(await bigBatch(dataset, 1))
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

  test('it trains under fsdp on { data: 2 } and { data: 2, model: 2 }: equal losses, gradient norms', async () => {
    const params = 10_675_200
    const dp = await train({ data: 2, model: 1 })
    // Each member owns half of every parameter and of its moments, and its heap holds one stage at a time:
    // under 3/8 of the heap limit the one process overflowed (1.5 GiB of 4 GiB at full size).
    for (const b of dp.ownedBytes) expect(Math.abs(b - (12 * params) / 2)).toBeLessThan(12 * 1000)
    for (const b of dp.heapBytes) expect(b).toBeLessThan(0.375 * HEAP)
    // The first loss is the one process's forward pass on the same weights and batch.
    expect(Math.abs(dp.losses[0]! - (await oneProcess).initialLoss)).toBeLessThan(1e-4)
    const tp = await train({ data: 2, model: 2 })
    expect(tp.ownedBytes).toHaveLength(4)
    for (const b of tp.ownedBytes) expect(b).toBeLessThan((12 * params) / 3)
    expect(dp.losses[1]).not.toBe(dp.losses[0]) // the update moved the model
    dp.losses.forEach((l, i) => expect(Math.abs(l - tp.losses[i]!)).toBeLessThan(1e-4))
    expect(Math.abs(dp.gradNorm - tp.gradNorm) / dp.gradNorm).toBeLessThan(1e-4)
    for (const b of tp.heapBytes) expect(b).toBeLessThan(0.375 * HEAP)
  }, 600_000)

  test('one process cannot train it: OUT_OF_MEMORY naming the model size and the sharded layouts', async () => {
    const line = await oneProcess
    expect(line.ok).toBe(false)
    expect(line.code).toBe('OUT_OF_MEMORY')
    expect(line.message).toMatch(/10\.7M parameters/)
    expect(line.message).toMatch(/more than one process's 64 MiB wasm heap holds at any batch size/)
    // the heap guard's own words name the held limit too, not wasm32's 4 GiB
    expect(line.message).toMatch(/MiB of the 64 MiB wasm heap in use/)
    expect(line.message).toMatch(/fsdp: true/)
    expect(line.message).toMatch(/mesh: \{ model: 2 \}/)
  }, 120_000)
})

test('a heap limit that is no whole number of wasm pages up to 4 GiB is refused, naming it', () => {
  for (const bytes of [0, 1000, 5 * 2 ** 30, Number.NaN])
    expect(() => holdWasmHeapTo(bytes)).toThrow(
      new RegExp(`wasm heap limit ${bytes}: give a positive multiple of 64 KiB`),
    )
})

test.each([
  { mesh: { data: 2, model: 1 }, fsdp: true },
  { mesh: { data: 1, model: 2 }, fsdp: false },
  { mesh: { data: 3, model: 2 }, fsdp: true },
  { mesh: { data: 2, model: 2 }, fsdp: false },
])('members draw exactly their parts of createModel(config, seed): $mesh fsdp $fsdp', DRAWS, ({ mesh, fsdp }) => {
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
