/**
 * A model one process cannot train (its parameters and gradients alone overflow the 4 GiB wasm
 * heap) fails there with OUT_OF_MEMORY, and trains sharded over 2 and 4 processes, the members
 * drawing only their parts of the initial weights (the driver never holds the model). The
 * references: one process's forward pass (which fits) for the first loss, and the 4-process layout
 * (other code: heads and MLP split, all-reduces between stages) for the loss after the update and
 * the gradient norm. Slow (hundreds of millions of parameters drawn, gathered, reduced and updated,
 * several times): generous timeouts. Large: their processes peak at ~12 GiB together, so the two
 * take a lock in the temporary folder (one run of them at a time on a machine) and run when the
 * machine then has 13 GiB available; otherwise they are skipped, saying so.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { LocalClient, withClient } from '@marin/fray'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { initBackend } from '../backend.js'
import { Dataset } from '../data/dataset.js'
import { BIG_MODEL, BIG_TOKENS, bigBatch } from '../test-support/big-model-child.js'
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
/** The loss of the initial model on the first batch, from a forward pass in one process (the first test). */
let oneProcessLoss: number | undefined

beforeAll(async () => {
  await initBackend()
})
const children: ChildProcess[] = []
afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL')
  await client.shutdown()
})

const NEEDS = 13 * GiB
const LOCK = path.join(os.tmpdir(), 'levanter-big-model-test.lock')

/** Bytes the kernel says it can give without swapping (`MemAvailable`). */
function available(): number {
  const m = /^MemAvailable:\s+(\d+) kB/m.exec(fs.readFileSync('/proc/meminfo', 'utf8'))
  return m ? Number(m[1]) * 1024 : os.freemem()
}

/** Waits for the machine-wide lock of these tests (a lock whose process is gone is taken over). */
async function lock(): Promise<void> {
  for (;;) {
    try {
      fs.writeFileSync(LOCK, String(process.pid), { flag: 'wx' })
      return
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
    }
    const holder = Number(fs.readFileSync(LOCK, 'utf8'))
    try {
      if (holder) process.kill(holder, 0)
    } catch {
      fs.rmSync(LOCK, { force: true }) // its process is gone
      continue
    }
    await new Promise((r) => setTimeout(r, 2000))
  }
}

let locked = false
/** Why the heavy tests skip: too little memory available (undefined: they run). */
let lacking: string | undefined
const why = () =>
  `big-model.test: ${(available() / GiB).toFixed(1)} GiB available, these tests need ${NEEDS / GiB}; skipped`

describe('a model one process cannot train', () => {
  beforeAll(async () => {
    await lock()
    locked = true
    if (available() < NEEDS) {
      lacking = why()
      console.info(lacking)
    }
  }, 3_600_000)
  afterAll(() => {
    if (locked && Number(fs.readFileSync(LOCK, 'utf8')) === process.pid) fs.rmSync(LOCK, { force: true })
  })

  test('one process cannot train it: OUT_OF_MEMORY naming the model size and the sharded layouts', async (ctx) => {
    if (lacking) return ctx.skip(lacking)
    const p = spawn(process.execPath, ['--import', 'tsx', child], {
      stdio: ['ignore', 'pipe', 'ignore'],
      env: { ...process.env, LEVANTER_BACKEND: 'wasm' },
    })
    children.push(p)
    let out = ''
    p.stdout.on('data', (d: Buffer) => (out += d.toString()))
    const code = await new Promise((r) => p.once('exit', r))
    expect(code).toBe(0)
    const line = JSON.parse(out.trim().split('\n').at(-1)!) as {
      initialLoss: number
      ok: boolean
      code?: string
      message?: string
    }
    oneProcessLoss = line.initialLoss
    expect(line.ok).toBe(false)
    expect(line.code).toBe('OUT_OF_MEMORY')
    expect(line.message).toMatch(/554\.1M parameters/)
    expect(line.message).toMatch(/4 GiB wasm heap/)
    expect(line.message).toMatch(/fsdp: true/)
    expect(line.message).toMatch(/mesh: \{ model: 2 \}/)
  }, 1_200_000)

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

  test('it trains under fsdp on { data: 2 } and { data: 2, model: 2 }: equal losses, gradient norms', async (ctx) => {
    if (lacking) return ctx.skip(lacking)
    const params = 554_092_544
    const dp = await train({ data: 2, model: 1 })
    // Each member owns half of every parameter and of its moments, and its heap holds one stage at a time.
    for (const b of dp.ownedBytes) expect(Math.abs(b - (12 * params) / 2)).toBeLessThan(12 * 1000)
    for (const b of dp.heapBytes) expect(b).toBeLessThan(1.5 * GiB)
    // The first loss is the one process's forward pass on the same weights and batch.
    expect(oneProcessLoss).toBeDefined()
    expect(Math.abs(dp.losses[0]! - oneProcessLoss!)).toBeLessThan(1e-4)
    const tp = await train({ data: 2, model: 2 })
    expect(tp.ownedBytes).toHaveLength(4)
    for (const b of tp.ownedBytes) expect(b).toBeLessThan((12 * params) / 3)
    expect(dp.losses[1]).not.toBe(dp.losses[0]) // the update moved the model
    dp.losses.forEach((l, i) => expect(Math.abs(l - tp.losses[i]!)).toBeLessThan(1e-4))
    expect(Math.abs(dp.gradNorm - tp.gradNorm) / dp.gradNorm).toBeLessThan(1e-4)
  }, 2_400_000)
})

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
