import * as tf from '@tensorflow/tfjs'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { openStore } from '@marin/finestore'
import { beforeAll, expect, test } from 'vitest'
import { initBackend } from '../backend.js'
import { createModel } from '../models/lm.js'
import type { CausalLM } from '../models/lm.js'
import { Checkpointer } from './checkpointer.js'
import { exportHf, importHf } from './hf.js'
import { loadModel } from './load-model.js'

const tiny = { vocabSize: 13, seqLen: 8, dModel: 8, nLayers: 1, nHeads: 2 }
/** Qwen3 with grouped-query attention (4 query heads over 2 key/value heads) and heads of 6, not dModel / nHeads. */
const configOf = (type: 'gpt2' | 'llama' | 'qwen3') =>
  type === 'qwen3' ? { type, ...tiny, nHeads: 4, nKvHeads: 2, headDim: 6 } : { type, ...tiny }
const ids = () => tf.tensor2d([[1, 2, 3, 12]], [1, 4], 'int32')
const logits = (m: CausalLM) => tf.tidy(() => Array.from(m.forward(ids()).dataSync()))

beforeAll(async () => {
  await initBackend()
})

test.each(['gpt2', 'llama', 'qwen3'] as const)(
  '%s: export into a finestore transaction and import from the view, no folder in between',
  async (type) => {
    const store = await openStore({ url: fs.mkdtempSync(path.join(os.tmpdir(), 'lev-hf-store-')) })
    const m = createModel(configOf(type), 5)
    const c = await store.commit(`models/${type}`, (txn) => exportHf(m, txn))
    const view = await store.open(c.ref)
    expect(view.files()).toEqual(['config.json', 'model.safetensors'])
    expect(logits(await importHf(view))).toEqual(logits(m))
    store.close()
  },
)

test('loadModel: a Qwen3 folder and checkpoint artifact rebuild the model, its own head size kept', async () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'lev-load-qwen3-'))
  const store = await openStore({ url: path.join(root, 'store') })
  const m = createModel(configOf('qwen3'), 8)
  await exportHf(m, path.join(root, 'hf'))
  const fromDir = await loadModel(path.join(root, 'hf'))
  expect(fromDir.model.config).toMatchObject({ type: 'qwen3', nHeads: 4, nKvHeads: 2, headDim: 6 })
  expect(logits(fromDir.model)).toEqual(logits(m))
  const ck = await Checkpointer.open({ store, run: 'q' })
  const manifest = { step: 3, dataPosition: 0, rng: { seed: 0 }, optimizerCount: 0, metrics: {} }
  const shapes = new Map(m.specs.map((s) => [s.name, s.shape]))
  await ck.save(
    { ...manifest, config: { model: m.config, trainer: {} } },
    { weights: await m.weights(), optimizer: new Map(), count: 0 },
    shapes,
  )
  const fromCk = await loadModel('checkpoints/q', { store })
  expect([fromCk.step, fromCk.model.config.headDim]).toEqual([3, 6])
  expect(logits(fromCk.model)).toEqual(logits(m))
  for (const x of [m, fromDir.model, fromCk.model]) x.dispose()
  store.close()
})

test('loadModel: a folder, an exported artifact, a checkpoint artifact at its newest or a chosen step', async () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'lev-load-'))
  const store = await openStore({ url: path.join(root, 'store') })
  const m = createModel({ type: 'llama', ...tiny }, 6)
  await exportHf(m, path.join(root, 'hf'))
  const fromDir = await loadModel(path.join(root, 'hf'))
  expect(fromDir.name).toBe('hf')
  expect(logits(fromDir.model)).toEqual(logits(m))

  await store.commit('models/mine', (txn) => exportHf(m, txn))
  const exported = await loadModel('models/mine@1', { store })
  expect([exported.name, exported.step]).toEqual(['models/mine', undefined])
  expect(exported.view?.ref).toBe('models/mine@1')
  expect(logits(exported.model)).toEqual(logits(m))

  // Two checkpoints: step 2 holds other weights than step 4.
  const ck = await Checkpointer.open({ store, run: 'run1' })
  const shapes = new Map(m.specs.map((s) => [s.name, s.shape]))
  const other = createModel({ type: 'llama', ...tiny }, 7)
  const manifest = (step: number) => ({
    step,
    dataPosition: 0,
    rng: { seed: 0 },
    optimizerCount: 0,
    config: { model: m.config, trainer: {} },
    metrics: {},
  })
  await ck.save(manifest(2), { weights: await other.weights(), optimizer: new Map(), count: 0 }, shapes)
  await ck.save(manifest(4), { weights: await m.weights(), optimizer: new Map(), count: 0 }, shapes)
  const newest = await loadModel('checkpoints/run1', { store })
  expect(newest).toMatchObject({ name: 'run1', step: 4 })
  expect(logits(newest.model)).toEqual(logits(m))
  const older = await loadModel('checkpoints/run1@2:2', { store })
  expect(older.step).toBe(2)
  expect(logits(older.model)).toEqual(logits(other))

  await expect(loadModel('checkpoints/run1:3', { store })).rejects.toMatchObject({
    code: 'CHECKPOINT_NOT_FOUND',
    message: expect.stringContaining('kept steps are 2, 4'),
  })
  await expect(loadModel('checkpoints/none', { store })).rejects.toMatchObject({
    code: 'CHECKPOINT_NOT_FOUND',
    message: expect.stringContaining('checkpoints/none'),
  })
  await expect(loadModel('no such dir!', { store })).rejects.toMatchObject({
    code: 'BAD_CONFIG',
    message: expect.stringContaining('not a directory nor an artifact reference'),
  })
  await expect(loadModel(path.join(root, 'nowhere'), { store })).rejects.toMatchObject({
    code: 'BAD_CONFIG',
    message: expect.stringContaining('not a directory nor an artifact reference'),
  })
  await expect(loadModel('models/mine')).rejects.toMatchObject({
    code: 'BAD_CONFIG',
    message: expect.stringContaining('store'),
  })
  store.close()
})
