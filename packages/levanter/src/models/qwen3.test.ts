/**
 * Qwen3 (models/qwen3.ts): a Hugging Face–format checkpoint imports to the logits of an independent PyTorch forward
 * (test-fixtures/hf-qwen3/make_fixtures.py), exports back to the same tensors, decodes from a KV cache, and trains
 * in one process and on a mesh.
 */
import * as tf from '@tensorflow/tfjs'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { LocalClient, withClient } from '@marin/fray'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { initBackend } from '../backend.js'
import { exportHf, importHf } from '../checkpoint/hf.js'
import { decodeSafetensors } from '../checkpoint/safetensors.js'
import type { SafeTensor } from '../checkpoint/safetensors.js'
import { Dataset } from '../data/dataset.js'
import { Pipeline } from '../pipeline.js'
import { Trainer } from '../trainer.js'
import type { TrainerConfigInput } from '../trainer.js'
import { BatchCache } from './batch-cache.js'
import { decodeStep, prefill } from './decode.js'
import { createModel, specsOf } from './lm.js'
import type { CausalLM } from './lm.js'

const FIXTURE = path.resolve(
  path.dirname(fileURLToPath(import.meta.url)),
  '../../test-fixtures/hf-qwen3/gqa-qknorm-f32',
)
const reference = JSON.parse(fs.readFileSync(path.join(FIXTURE, 'reference.json'), 'utf8')) as {
  ids: number[]
  logits: number[]
}
const V = 24

function readTensors(dir: string): Map<string, SafeTensor> {
  const out = new Map<string, SafeTensor>()
  for (const f of fs.readdirSync(dir).filter((n) => n.endsWith('.safetensors')))
    for (const [n, t] of decodeSafetensors(new Uint8Array(fs.readFileSync(path.join(dir, f)))).tensors) out.set(n, t)
  return out
}

function maxDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  expect(a.length).toBe(b.length)
  let m = 0
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!))
  return m
}

const logitsOf = (m: CausalLM, ids: number[]): Float32Array =>
  tf.tidy(() => m.forward(tf.tensor2d(ids, [1, ids.length], 'int32')).dataSync() as Float32Array)

const client = new LocalClient({ mode: 'inline' })
beforeAll(async () => {
  await initBackend()
})
afterAll(() => client.shutdown())

describe('Qwen3 from Hugging Face files', () => {
  test('import: config and logits equal the independent PyTorch reference', async () => {
    const m = await importHf(FIXTURE)
    expect(m.config).toMatchObject({ type: 'qwen3', nHeads: 4, nKvHeads: 2, headDim: 8, dModel: 16 })
    expect(maxDiff(logitsOf(m, reference.ids), reference.logits)).toBeLessThan(2e-4)
    m.dispose()
  })

  test('the per-head q/k norms are applied: with unit weights the logits differ', async () => {
    const m = await importHf(FIXTURE)
    for (const n of ['q_norm', 'k_norm']) m.set(`model.layers.0.self_attn.${n}.weight`, new Float32Array(8).fill(1))
    expect(maxDiff(logitsOf(m, reference.ids), reference.logits)).toBeGreaterThan(1e-3)
    m.dispose()
  })

  test('export writes the same tensors and config; re-import gives the reference logits', async () => {
    const m = await importHf(FIXTURE)
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lev-qwen3-export-'))
    await exportHf(m, dir, { dtype: 'float32' })
    const want = readTensors(FIXTURE),
      got = readTensors(dir)
    expect([...got.keys()].sort()).toEqual([...want.keys()].sort())
    for (const [n, t] of want) {
      expect(got.get(n)!.shape, n).toEqual(t.shape)
      expect(Array.from(got.get(n)!.data), n).toEqual(Array.from(t.data))
    }
    const cfg = JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8'))
    const orig = JSON.parse(fs.readFileSync(path.join(FIXTURE, 'config.json'), 'utf8'))
    for (const k of ['architectures', 'model_type', 'num_key_value_heads', 'head_dim', 'rope_theta', 'rms_norm_eps'])
      expect(cfg[k], k).toEqual(orig[k])
    expect(cfg.tie_word_embeddings).toBe(false)
    const back = await importHf(dir)
    expect(maxDiff(logitsOf(back, reference.ids), reference.logits)).toBeLessThan(2e-4)
    back.dispose()
    m.dispose()
  })

  test('what import cannot honour is refused, naming the field', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lev-qwen3-bad-'))
    fs.copyFileSync(path.join(FIXTURE, 'model.safetensors'), path.join(dir, 'model.safetensors'))
    const cfg = JSON.parse(fs.readFileSync(path.join(FIXTURE, 'config.json'), 'utf8'))
    fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify({ ...cfg, use_sliding_window: true }))
    await expect(importHf(dir)).rejects.toThrow(/use_sliding_window = true is not supported/)
    fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify({ ...cfg, rope_scaling: { type: 'linear' } }))
    await expect(importHf(dir)).rejects.toThrow(/rope_scaling is not supported for Qwen3ForCausalLM/)
  })

  test('prefill + KV-cache decode steps give the reference logits at every position', async () => {
    const m = await importHf(FIXTURE)
    const { ids, logits } = reference
    const p = await prefill(m, [ids.slice(0, 4), ids.slice(0, 6)], false)
    expect(p.kv[0]!.k.shape).toEqual([2, 2, 6, 8]) // only the key/value heads, headDim wide
    expect(maxDiff(p.logits[0]!, logits.slice(3 * V, 4 * V))).toBeLessThan(2e-4)
    expect(maxDiff(p.logits[1]!, logits.slice(5 * V, 6 * V))).toBeLessThan(2e-4)
    const cache = new BatchCache()
    cache.add(p.kv, [4, 6])
    for (let s = 0; s < 4; s++) {
      const out = await decodeStep(m, cache, [ids[4 + s]!, ids[6 + s]!])
      expect(maxDiff(out.subarray(0, V), logits.slice((4 + s) * V, (5 + s) * V))).toBeLessThan(2e-4)
      expect(maxDiff(out.subarray(V), logits.slice((6 + s) * V, (7 + s) * V))).toBeLessThan(2e-4)
    }
    cache.dispose()
    m.dispose()
  })
})

describe('Qwen3 training', () => {
  const config = {
    type: 'qwen3',
    vocabSize: 11,
    seqLen: 8,
    dModel: 16,
    nLayers: 2,
    nHeads: 4,
    nKvHeads: 2,
    headDim: 6,
    intermediateSize: 16,
  } as const
  const tokens = Array.from({ length: 1200 }, (_, i) => ((i * 3) % 10) + (i % 23 === 0 ? 1 : 0))

  async function losses(layout: Pick<TrainerConfigInput, 'mesh' | 'fsdp'>, steps: number): Promise<number[]> {
    const model = createModel(config, 5)
    const trainer = new Trainer({ learningRate: 3e-2, batchSize: 4, seed: 2, ...layout }, { trackers: [] })
    const dataset = Dataset.fromTokens(tokens, { evalFraction: 0 })
    const r = await withClient(client, () => new Pipeline({ dataset, model, trainer, maxSteps: steps }).run())
    model.dispose()
    return [...r.losses]
  }

  test('specs carry the per-head norms (replicated) and the head size', () => {
    const by = new Map(specsOf(config).map((s) => [s.name, s]))
    expect(by.get('model.layers.1.self_attn.q_proj.weight')).toMatchObject({ shape: [16, 24], shard: 'column' })
    expect(by.get('model.layers.1.self_attn.k_proj.weight')).toMatchObject({ shape: [16, 12], shard: 'column' })
    expect(by.get('model.layers.1.self_attn.o_proj.weight')).toMatchObject({ shape: [24, 16], shard: 'row' })
    expect(by.get('model.layers.1.self_attn.q_norm.weight')).toMatchObject({ shape: [6], init: 'ones' })
    expect(by.get('model.layers.1.self_attn.q_norm.weight')!.shard ?? 'replicated').toBe('replicated')
    expect(by.has('lm_head.weight')).toBe(true)
  })

  test('loss falls in one process; { data: 2 }, { data: 2 } fsdp and { model: 2 } match it within 1e-4', async () => {
    const one = await losses({}, 8)
    expect(one.at(-1)!).toBeLessThan(one[0]! * 0.9)
    for (const layout of [{ mesh: { data: 2 } }, { mesh: { data: 2 }, fsdp: true }, { mesh: { model: 2 } }]) {
      const got = await losses(layout, 8)
      expect(got).toHaveLength(one.length)
      got.forEach((l, i) => expect(Math.abs(l - one[i]!), `${JSON.stringify(layout)} step ${i}`).toBeLessThan(1e-4))
    }
  }, 180_000)
})
