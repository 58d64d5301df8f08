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
import { evalLossOf, LocalEngine } from '../engine.js'
import type { StepResult } from '../engine.js'
import { generateAsync } from '../generate.js'
import { createModel } from '../models/lm.js'
import { AdamWConfig } from '../optim/adamw.js'
import { DeviceAdamW } from '../optim/adamw-device.js'
import { Pipeline } from '../pipeline.js'
import { TINY_BATCH, TINY_MODELS, TINY_TOKENS, trainSpec } from '../test-support/backend-train.js'
import { MemoryTracker } from '../trackers.js'
import { Trainer } from '../trainer.js'
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

/** One model size for every test here (every matrix dimension 16, batches of one sequence): SwiftShader compiles each
 * distinct matrix-product shader once a process, and a second size would compile a second set. */
const SMALL = TINY_MODELS.llama
const SMALL_TOKENS = TINY_TOKENS
const { batchSize: B, seqLen: T } = TINY_BATCH

let info: BackendInfo

beforeAll(async () => {
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

  test('tiny GPT-2 and Llama train 10 steps within 1e-4 of wasm; a webgpu checkpoint resumes on wasm', async () => {
    // GPT-2 stops after step 5 (checkpointed) and resumes from it, on webgpu here and on wasm in a child process.
    const store = path.join(tmp, 'store'),
      copy = path.join(tmp, 'store-for-wasm')
    const gpt2 = await trainSpec({ model: 'gpt2', maxSteps: 10, store, stopAfter: 5 })
    fs.cpSync(store, copy, { recursive: true })
    // One wasm process, beside the rest of the webgpu side: an uninterrupted 10-step run per model, and the GPT-2
    // run resumed from the webgpu checkpoint of step 5.
    const onWasmRuns = onWasm([
      { model: 'gpt2', maxSteps: 10 },
      { model: 'llama', maxSteps: 10 },
      { model: 'gpt2', maxSteps: 10, store: copy },
    ])
    onWasmRuns.catch(() => {})
    gpt2.push(...(await trainSpec({ model: 'gpt2', maxSteps: 10, store })))
    const llama = await trainSpec({ model: 'llama', maxSteps: 10 })
    const [refGpt2, refLlama, resumed] = await onWasmRuns
    expect(gpt2).toHaveLength(10)
    expect(llama).toHaveLength(10)
    expect(resumed).toHaveLength(5) // steps 6..10
    expect(gpt2[9]!).toBeLessThan(gpt2[0]! - 0.1) // it learns
    for (let i = 0; i < 10; i++) {
      expect(Math.abs(gpt2[i]! - refGpt2![i]!), `gpt2 step ${i + 1}`).toBeLessThan(1e-4)
      expect(Math.abs(llama[i]! - refLlama![i]!), `llama step ${i + 1}`).toBeLessThan(1e-4)
    }
    for (let i = 0; i < 5; i++)
      expect(Math.abs(resumed![i]! - refGpt2![5 + i]!), `gpt2 on wasm, step ${6 + i}`).toBeLessThan(1e-4)
    // the checkpoint's manifest names the backend and adapter it was trained on
    const ckpt = await Checkpointer.open({ store, run: 'tiny-gpt2' })
    const saved = await ckpt.load()
    ckpt.close()
    expect((saved!.manifest.config as { backend?: unknown }).backend).toEqual(info)
  }, 600_000)

  test.each(['gpt2', 'llama', 'qwen3', 'mixtral'] as const)(
    '%s generation with the KV cache equals the full forward, on webgpu',
    async (type) => {
      // Three tokens: the prefill and two cached decode steps against three full forwards. On SwiftShader every
      // sequence length the full forward sees compiles its own shaders, most of this test's time.
      const m = createModel(TINY_MODELS[type], 9)
      const o = { maxNewTokens: 3, temperature: 0.9, topK: 8, seed: 3 }
      const cached = await generateAsync(m, [1, 2, 3], o)
      const full = await generateAsync(m, [1, 2, 3], { ...o, useCache: false })
      expect(cached.tokens).toHaveLength(3)
      expect(cached.tokens).toEqual(full.tokens)
      cached.logprobs.forEach((lp, i) => expect(Math.abs(lp - full.logprobs[i]!)).toBeLessThan(1e-4))
      m.dispose()
    },
    120_000,
  )

  test('the masked loss and evalLossOf read nothing synchronously: they run on webgpu', async () => {
    const model = createModel(SMALL, 4)
    const batch = await Dataset.fromTokens(SMALL_TOKENS, { evalFraction: 0 }).trainBatch(0, B, T, 0)
    const engine = new LocalEngine(model, AdamWConfig.parse({}))
    const viaEngine = await engine.evalLoss(batch)
    const viaHost = await evalLossOf(model, batch)
    expect(viaHost).toBe(viaEngine)
    expect(Number.isFinite(viaHost)).toBe(true)
    await engine.close()
    model.dispose()
  }, 120_000)

  test('a second checkpoint of the same engine holds the moments of its own step', async () => {
    const data = Dataset.fromTokens(SMALL_TOKENS, { evalFraction: 0 })
    const b = await Promise.all([0, 1, 2, 3, 4].map((s) => data.trainBatch(s, B, T, 0)))
    const a = new LocalEngine(createModel(SMALL, 3), AdamWConfig.parse({}))
    await a.step(b[0]!, 1e-2)
    await a.state() // the first checkpoint reads the moments once
    await a.step(b[1]!, 1e-2)
    await a.step(b[2]!, 1e-2)
    const resumed = new LocalEngine(createModel(SMALL, 3), AdamWConfig.parse({}))
    await resumed.load(await a.state())
    const next = [await a.step(b[3]!, 1e-2), await a.step(b[4]!, 1e-2)]
    expect([await resumed.step(b[3]!, 1e-2), await resumed.step(b[4]!, 1e-2)]).toEqual(next)
    for (const e of [a, resumed]) {
      await e.close()
      e.model.dispose()
    }
  }, 120_000)

  test('a step that does not log reads nothing back; deferred results come in one read, the same numbers', async () => {
    const data = Dataset.fromTokens(SMALL_TOKENS, { evalFraction: 0 })
    const batches = await Promise.all([0, 1, 2, 3].map((s) => data.trainBatch(s, B, T, 0)))
    const run = async (defer: boolean) => {
      const model = createModel(SMALL, 2)
      const engine = new LocalEngine(model, AdamWConfig.parse({}))
      const out: StepResult[] = []
      const toHost: number[] = []
      for (const [i, b] of batches.entries()) {
        if (defer && i < 3) await engine.stepDeferred!(b, 1e-2)
        else if (defer) {
          await engine.stepDeferred!(b, 1e-2)
          out.push(...(await engine.readPending!()))
        } else out.push(await engine.step(b, 1e-2))
        toHost.push(engine.lastStep.toHost)
        expect(engine.lastStep.toDevice).toBe(12 * B * T) // ids, targets, mask: 12 bytes a token
      }
      await engine.close()
      model.dispose()
      return { out, toHost, reads: engine.reads, total: engine.transferred.toHost }
    }
    const eager = await run(false)
    const deferred = await run(true)
    expect(eager.toHost).toEqual([8, 8, 8, 8]) // loss and gradient norm, float32
    expect(deferred.toHost).toEqual([0, 0, 0, 32]) // nothing until asked, then all four steps' at once
    expect([eager.reads, deferred.reads]).toEqual([4, 1])
    expect(deferred.total).toBe(eager.total)
    expect(deferred.out).toEqual(eager.out)
  }, 240_000)

  test('Pipeline on webgpu reads the loss only where it logs, evaluates, checkpoints or runs a hook', async () => {
    const data = Dataset.fromTokens(SMALL_TOKENS, { evalFraction: 0.1 })
    type Hook = (info: { step: number; loss: number }) => void
    const train = async (every: number, extra: object = {}, hook?: Hook) => {
      const model = createModel(SMALL, 2)
      const tracker = new MemoryTracker()
      const trainer = new Trainer(
        { batchSize: B, learningRate: 1e-2, logEvery: every, ...extra },
        { trackers: [tracker] },
      )
      if (hook) trainer.addHook(4, hook)
      const p = new Pipeline({ dataset: data, model, trainer, maxSteps: 10 })
      const r = await p.run()
      model.dispose()
      return { r, engine: p.engine as LocalEngine, tracker }
    }
    const eager = await train(1)
    const lazy = await train(5)
    expect(lazy.engine).toBeInstanceOf(LocalEngine)
    expect(lazy.engine.opt).toBeInstanceOf(DeviceAdamW) // the device's capabilities: AdamW there, deferred reads
    expect(lazy.engine.stepDeferred).toBeDefined()
    expect(eager.engine.reads).toBe(10)
    expect(lazy.engine.reads).toBe(2) // steps 5 and 10
    expect(lazy.engine.transferred.toHost).toBe(10 * 8) // every step's loss and norm, in two reads
    expect(lazy.r.losses).toEqual(eager.r.losses)
    expect(lazy.r.last!.loss).toBe(eager.r.losses[9])
    expect(lazy.tracker.rows.filter((r) => 'train/loss' in r).map((r) => r.step)).toEqual([5, 10])
    // evaluation every 3 steps and a hook every 4 are read points too (one run for both)
    const hooked: number[] = []
    const mixed = await train(10, { evalEvery: 3, evalBatches: 1 }, ({ step, loss }) => void hooked.push(step, loss))
    expect(mixed.engine.reads).toBe(6) // steps 3, 4, 6, 8, 9, 10
    expect(mixed.r.losses).toEqual(eager.r.losses)
    expect(hooked).toEqual([4, eager.r.losses[3], 8, eager.r.losses[7]])
  }, 240_000)

  test('no tensor or GPU-buffer growth over 10 device steps (results read every 5)', async () => {
    const model = createModel(SMALL, 2)
    const engine = new LocalEngine(model, AdamWConfig.parse({}))
    const data = Dataset.fromTokens(SMALL_TOKENS, { evalFraction: 0 })
    const steps = async (from: number, n: number) => {
      for (let s = from; s < from + n; s++) {
        await engine.stepDeferred!(await data.trainBatch(s, B, T, 0), 1e-3)
        if (s % 5 === 4) expect(await engine.readPending!()).toHaveLength(5)
      }
    }
    await steps(0, 5) // the loop once, so that every buffer size it uses is in tfjs's pool
    const memory = () => tf.memory() as tf.MemoryInfo & { numBytesAllocatedInGPU?: number }
    const before = memory()
    const t0 = performance.now()
    const seen: number[] = []
    for (let s = 5; s < 15; s += 5) {
      await steps(s, 5)
      seen.push(memory().numBytesAllocatedInGPU!)
    }
    const after = memory()
    console.log(`10 device steps on ${info.adapter!.description}: ${((performance.now() - t0) / 1000).toFixed(1)} s`)
    expect(after.numTensors).toBe(before.numTensors)
    expect(after.numBytes).toBe(before.numBytes)
    expect(before.numBytesAllocatedInGPU).toBeGreaterThan(0)
    expect(seen).toEqual(seen.map(() => before.numBytesAllocatedInGPU))
    expect(engine.transferred.toHost).toBe(15 * 8)
    expect(engine.reads).toBe(3)
    await engine.close()
    model.dispose()
  }, 240_000)
})
