/**
 * The webgpu backend end to end on this machine's adapter: SwiftShader from the registry where
 * there is no GPU. Training matches the wasm backend (run in a child process) step for step.
 */
import { execFile } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import * as tf from '@tensorflow/tfjs'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { initBackend } from '../backend.js'
import type { BackendInfo } from '../backend.js'
import { Checkpointer } from '../checkpoint/checkpointer.js'
import { Dataset } from '../data/dataset.js'
import { DeviceEngine } from '../device-engine.js'
import { generateAsync } from '../generate.js'
import { createModel } from '../models/lm.js'
import { AdamWConfig } from '../optim/adamw.js'
import { TINY_MODELS, trainSpec } from '../test-support/backend-train.js'
import type { TrainSpec } from '../test-support/backend-train.js'

const script = path.join(import.meta.dirname, '..', 'test-support', 'backend-train.ts')
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'levanter-webgpu-'))

/** Losses of `specs` trained one after another on wasm, in a child process. */
async function onWasm(specs: TrainSpec[]): Promise<number[][]> {
  const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', script, JSON.stringify(specs)], {
    env: { ...process.env, LEVANTER_BACKEND: 'wasm' },
    maxBuffer: 16 << 20,
  })
  return (JSON.parse(stdout.trim().split('\n').at(-1)!) as { losses: number[][] }).losses
}

let info: BackendInfo
// The wasm side starts at once and runs beside the webgpu side: one uninterrupted 20-step run per
// model, and the GPT-2 run resumed on wasm from the webgpu checkpoint of step 10 (started later).
let reference: Promise<number[][]>

beforeAll(async () => {
  reference = onWasm([
    { model: 'gpt2', maxSteps: 20 },
    { model: 'llama', maxSteps: 20 },
  ])
  reference.catch(() => {})
  info = await initBackend('webgpu')
}, 120_000)

afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }))

describe('webgpu backend', () => {
  test('LEVANTER_BACKEND=webgpu starts the webgpu backend and names its adapter (SwiftShader without a GPU)', () => {
    expect(info.name).toBe('webgpu')
    expect(tf.getBackend()).toBe('webgpu')
    expect(info.adapter).toBeDefined()
    if (info.adapter!.software) expect(info.adapter!.architecture).toBe('swiftshader')
    expect(info.adapter!.vendor.length).toBeGreaterThan(0)
  })

  test('a synchronous read of a GPU tensor fails with a clear error; an asynchronous one works', async () => {
    const t = tf.matMul(tf.ones([2, 3]), tf.ones([3, 2]))
    expect(() => t.dataSync()).toThrow(/await tensor.data\(\)/)
    expect(Array.from(await t.data())).toEqual([3, 3, 3, 3])
    t.dispose()
  })

  test('tiny GPT-2 and Llama train 20 steps within 1e-4 of wasm; a webgpu checkpoint resumes on wasm', async () => {
    // GPT-2 stops after step 10 (checkpointed) and resumes from it, on webgpu here and on wasm in a child process.
    const store = path.join(tmp, 'store'),
      copy = path.join(tmp, 'store-for-wasm')
    const gpt2 = await trainSpec({ model: 'gpt2', maxSteps: 20, store, stopAfter: 10 })
    fs.cpSync(store, copy, { recursive: true })
    const onWasmResumed = onWasm([{ model: 'gpt2', maxSteps: 20, store: copy }])
    gpt2.push(...(await trainSpec({ model: 'gpt2', maxSteps: 20, store })))
    const llama = await trainSpec({ model: 'llama', maxSteps: 20 })
    const [refGpt2, refLlama] = await reference
    const [resumed] = await onWasmResumed
    expect(gpt2).toHaveLength(20)
    expect(llama).toHaveLength(20)
    expect(resumed).toHaveLength(10) // steps 11..20
    expect(gpt2[19]!).toBeLessThan(gpt2[0]! - 0.1) // it learns
    for (let i = 0; i < 20; i++) {
      expect(Math.abs(gpt2[i]! - refGpt2![i]!), `gpt2 step ${i + 1}`).toBeLessThan(1e-4)
      expect(Math.abs(llama[i]! - refLlama![i]!), `llama step ${i + 1}`).toBeLessThan(1e-4)
    }
    for (let i = 0; i < 10; i++)
      expect(Math.abs(resumed![i]! - refGpt2![10 + i]!), `gpt2 on wasm, step ${11 + i}`).toBeLessThan(1e-4)
    // the checkpoint's manifest names the backend and adapter it was trained on
    const ckpt = await Checkpointer.open({ store, run: 'tiny-gpt2' })
    const saved = await ckpt.load()
    ckpt.close()
    expect((saved!.manifest.config as { backend?: unknown }).backend).toEqual(info)
  }, 600_000)

  test.each(['gpt2', 'llama'] as const)(
    '%s generation with the KV cache equals the full forward, on webgpu',
    async (type) => {
      const m = createModel({ ...TINY_MODELS[type], vocabSize: 19, seqLen: 16 }, 9)
      const o = { maxNewTokens: 6, temperature: 0.9, topK: 8, seed: 3 }
      const cached = await generateAsync(m, [1, 2, 3], o)
      const full = await generateAsync(m, [1, 2, 3], { ...o, useCache: false })
      expect(cached.tokens).toHaveLength(6)
      expect(cached.tokens).toEqual(full.tokens)
      cached.logprobs.forEach((lp, i) => expect(Math.abs(lp - full.logprobs[i]!)).toBeLessThan(1e-4))
      m.dispose()
    },
    120_000,
  )

  test('no tensor or GPU-buffer growth over 50 device steps', async () => {
    const model = createModel({ ...TINY_MODELS.llama, seqLen: 8 }, 2)
    const engine = new DeviceEngine(model, AdamWConfig.parse({}))
    const data = Dataset.fromTokens(
      Array.from({ length: 4000 }, (_, i) => (i * 37) % 383),
      { evalFraction: 0 },
    )
    const batch = await data.trainBatch(0, 2, 8, 0)
    await engine.step(batch, 1e-3)
    await engine.step(batch, 1e-3)
    const before = tf.memory() as tf.MemoryInfo & { numBytesAllocatedInGPU?: number }
    for (let s = 0; s < 50; s++) await engine.step(await data.trainBatch(s, 2, 8, 0), 1e-3)
    const after = tf.memory() as tf.MemoryInfo & { numBytesAllocatedInGPU?: number }
    expect(after.numTensors).toBe(before.numTensors)
    expect(after.numBytes).toBe(before.numBytes)
    expect(before.numBytesAllocatedInGPU).toBeGreaterThan(0)
    expect(after.numBytesAllocatedInGPU).toBe(before.numBytesAllocatedInGPU)
    await engine.close()
    model.dispose()
  }, 240_000)
})
