/**
 * Hugging Face checkpoints people download: grouped-query attention, bfloat16/float16 files,
 * sharded files with an index, tied Llama heads and rotary scaling. Fixtures and reference logits
 * come from an independent PyTorch implementation (test-fixtures/hf-llama/make_fixtures.py).
 */
import * as tf from '@tensorflow/tfjs'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { openStore } from '@marin/finestore'
import { beforeAll, describe, expect, test } from 'vitest'
import { initBackend } from '../backend.js'
import { BatchCache } from '../models/batch-cache.js'
import { decodeStep, prefill } from '../models/decode.js'
import { createModel } from '../models/lm.js'
import type { CausalLM } from '../models/lm.js'
import { computeGrads } from '../train-step.js'
import { exportHf, importHf } from './hf.js'
import { loadModel } from './load-model.js'
import { decodeSafetensors, encodeSafetensors } from './safetensors.js'
import type { SafeTensor } from './safetensors.js'

const FIXTURES = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../test-fixtures/hf-llama')
const CASES = ['gqa-f32', 'bf16-sharded-tied-llama3', 'f16-mqa-linear'] as const
type Reference = { ids: number[]; logits: number[] }
const reference = (c: string): Reference =>
  JSON.parse(fs.readFileSync(path.join(FIXTURES, c, 'reference.json'), 'utf8')) as Reference

/** Every tensor of a checkpoint directory (one file or shards), by name. */
function readTensors(dir: string): Map<string, SafeTensor> {
  const files = fs.readdirSync(dir).filter((f) => f.endsWith('.safetensors'))
  const out = new Map<string, SafeTensor>()
  for (const f of files)
    for (const [n, t] of decodeSafetensors(new Uint8Array(fs.readFileSync(path.join(dir, f)))).tensors) out.set(n, t)
  return out
}

function maxDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  expect(a.length).toBe(b.length)
  let m = 0
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!))
  return m
}

function logitsOf(m: CausalLM, ids: number[]): Float32Array {
  return tf.tidy(() => m.forward(tf.tensor2d(ids, [1, ids.length], 'int32')).dataSync() as Float32Array)
}

beforeAll(async () => {
  await initBackend()
})

describe('import', () => {
  test.each(CASES)('%s: logits equal the independent reference', async (c) => {
    const m = await importHf(path.join(FIXTURES, c))
    const ref = reference(c)
    expect(maxDiff(logitsOf(m, ref.ids), ref.logits)).toBeLessThan(2e-4)
    m.dispose()
  })

  test('rotary scaling is applied: without it the llama3 and linear fixtures give other logits', async () => {
    for (const c of ['bf16-sharded-tied-llama3', 'f16-mqa-linear']) {
      const m = await importHf(path.join(FIXTURES, c))
      expect(m.config.type === 'llama' && m.config.ropeScaling).toBeTruthy()
      const plain = createModel({ ...m.config, ropeScaling: undefined } as never)
      for (const [n, w] of await m.weights()) plain.set(n, w)
      expect(maxDiff(logitsOf(plain, reference(c).ids), reference(c).logits)).toBeGreaterThan(1e-3)
      m.dispose()
      plain.dispose()
    }
  })

  test('a shard named by the index but absent is named in the error', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lev-hf-shard-'))
    const src = path.join(FIXTURES, 'bf16-sharded-tied-llama3')
    for (const f of ['config.json', 'model.safetensors.index.json', 'model-00001-of-00002.safetensors'])
      fs.copyFileSync(path.join(src, f), path.join(dir, f))
    await expect(importHf(dir)).rejects.toThrow(/model-00002-of-00002\.safetensors/)
  })
})

describe('what import cannot honour is refused, naming the field or tensor', () => {
  const variant = (edit: (cfg: Record<string, unknown>) => void, extra?: string) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lev-hf-bad-'))
    const src = path.join(FIXTURES, 'gqa-f32')
    const cfg = JSON.parse(fs.readFileSync(path.join(src, 'config.json'), 'utf8'))
    edit(cfg)
    fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify(cfg))
    const tensors = decodeSafetensors(new Uint8Array(fs.readFileSync(path.join(src, 'model.safetensors')))).tensors
    if (extra) tensors.set(extra, { shape: [2], data: new Float32Array(2) })
    fs.writeFileSync(path.join(dir, 'model.safetensors'), encodeSafetensors(tensors))
    return dir
  }
  const edits: [string, Record<string, unknown>, RegExp][] = [
    ['rope_scaling yarn', { rope_scaling: { rope_type: 'yarn', factor: 4 } }, /rope_scaling type "yarn" is not/],
    ['head_dim', { head_dim: 16 }, /head_dim 16/],
    ['attention_bias', { attention_bias: true }, /attention_bias/],
    ['mlp_bias', { mlp_bias: true }, /mlp_bias/],
  ]
  test.each(edits)('%s', async (_name, fields, message) => {
    await expect(importHf(variant((c) => Object.assign(c, fields)))).rejects.toThrow(message)
  })

  test('a tensor the model does not use', async () => {
    const dir = variant(() => {}, 'model.layers.0.self_attn.q_proj.bias')
    await expect(importHf(dir)).rejects.toThrow(/"model\.layers\.0\.self_attn\.q_proj\.bias" is not used/)
    // rotary buffers that older exports carry are fine
    await expect(importHf(variant(() => {}, 'model.layers.0.self_attn.rotary_emb.inv_freq'))).resolves.toBeTruthy()
  })
})

describe('generation with grouped-query attention', () => {
  test.each(['gqa-f32', 'f16-mqa-linear'])(
    '%s: prefill + KV-cache decode steps give the reference logits at every position',
    async (c) => {
      const m = await importHf(path.join(FIXTURES, c))
      const { ids, logits } = reference(c)
      const V = 40
      // two rows at different positions: the whole prompt's first 4 and first 6 tokens
      const p = await prefill(m, [ids.slice(0, 4), ids.slice(0, 6)], false)
      expect(p.kv[0]!.k.shape[1]).toBe(c === 'gqa-f32' ? 2 : 1) // the cache keeps only the key/value heads
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
    },
  )
})

describe('export', () => {
  test.each([
    ['gqa-f32', 'float32', undefined],
    ['bf16-sharded-tied-llama3', 'bfloat16', 16_000],
    ['f16-mqa-linear', 'float16', undefined],
  ] as const)('%s: re-export as %s writes the same tensors and config', async (c, dtype, maxShardBytes) => {
    const m = await importHf(path.join(FIXTURES, c))
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), `lev-hf-export-${c}-`))
    await exportHf(m, dir, { dtype, maxShardBytes })
    const want = readTensors(path.join(FIXTURES, c)),
      got = readTensors(dir)
    expect([...got.keys()].sort()).toEqual([...want.keys()].sort())
    for (const [n, t] of want) {
      expect(got.get(n)!.shape, n).toEqual(t.shape)
      expect(Array.from(got.get(n)!.data), n).toEqual(Array.from(t.data))
    }
    const cfg = JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8'))
    const orig = JSON.parse(fs.readFileSync(path.join(FIXTURES, c, 'config.json'), 'utf8'))
    for (const k of ['num_attention_heads', 'num_key_value_heads', 'tie_word_embeddings', 'torch_dtype'])
      expect(cfg[k], k).toEqual(orig[k])
    const kind = (s: Record<string, unknown> | undefined) => s && (s.rope_type ?? s.type)
    expect(kind(cfg.rope_scaling)).toEqual(kind(orig.rope_scaling))
    if (maxShardBytes) {
      const index = JSON.parse(fs.readFileSync(path.join(dir, 'model.safetensors.index.json'), 'utf8'))
      const files = new Set(Object.values(index.weight_map as Record<string, string>))
      expect(files.size).toBeGreaterThan(1)
      for (const f of files) expect(fs.statSync(path.join(dir, f)).size).toBeLessThan(maxShardBytes + 4096)
      expect(fs.existsSync(path.join(dir, 'model.safetensors'))).toBe(false)
    }
    const back = await importHf(dir)
    expect(maxDiff(logitsOf(back, reference(c).ids), reference(c).logits)).toBeLessThan(2e-4)
    back.dispose()
    m.dispose()
  })
})

test('a sharded bfloat16 export committed to finestore loads by reference', async () => {
  const store = await openStore({ url: fs.mkdtempSync(path.join(os.tmpdir(), 'lev-hf-shard-store-')) })
  const m = await importHf(path.join(FIXTURES, 'gqa-f32'))
  await store.commit('models/gqa', (txn) => exportHf(m, txn, { dtype: 'bfloat16', maxShardBytes: 20_000 }))
  const { model } = await loadModel('models/gqa', { store })
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lev-hf-bf16-'))
  await exportHf(m, dir, { dtype: 'bfloat16' })
  const single = await importHf(dir)
  const ids = reference('gqa-f32').ids
  expect(Array.from(logitsOf(model, ids))).toEqual(Array.from(logitsOf(single, ids)))
  // bfloat16 keeps 8 bits of mantissa: close to the float32 reference, not equal
  expect(maxDiff(logitsOf(model, ids), reference('gqa-f32').logits)).toBeLessThan(0.5)
  expect(maxDiff(logitsOf(model, ids), reference('gqa-f32').logits)).toBeGreaterThan(1e-3)
  single.dispose()
  model.dispose()
  m.dispose()
  store.close()
})

describe('training with grouped-query attention', () => {
  test('k/v projections have kv-head width, their gradient matches a finite difference, and loss falls', () => {
    const tiny = { vocabSize: 16, seqLen: 8, dModel: 16, nLayers: 1, nHeads: 4, nKvHeads: 2 }
    const m = createModel({ type: 'llama', ...tiny }, 3)
    expect(m.param('model.layers.0.self_attn.k_proj.weight').shape).toEqual([16, 8])
    expect(m.param('model.layers.0.self_attn.v_proj.weight').shape).toEqual([16, 8])
    const inputs = Int32Array.from([1, 5, 2, 9, 3, 3, 7, 0]),
      targets = Int32Array.from([5, 2, 9, 3, 3, 7, 0, 1])
    const batch = { inputs, targets, mask: new Float32Array(8).fill(1), batchSize: 1, seqLen: 8 }
    const name = 'model.layers.0.self_attn.k_proj.weight'
    const first = computeGrads(m, batch, 8)
    const g = first.grads.get(name)!.dataSync()[5]!
    const w = m.param(name).dataSync() as Float32Array
    const h = 1e-2
    const at = (d: number) => {
      const c = Float32Array.from(w)
      c[5] = c[5]! + d
      m.set(name, c)
      const r = computeGrads(m, batch, 8)
      for (const t of r.grads.values()) t.dispose()
      return r.loss
    }
    const numeric = (at(h) - at(-h)) / (2 * h)
    m.set(name, w)
    expect(Math.abs(numeric - g)).toBeLessThan(1e-3 + 0.05 * Math.abs(g))
    expect(Math.abs(g)).toBeGreaterThan(1e-6)
    // plain gradient descent lowers the loss
    let grads = first.grads,
      loss = first.loss
    for (let step = 0; step < 5; step++) {
      for (const [n, t] of grads) {
        const v = m.param(n)
        v.assign(tf.tidy(() => tf.sub(v, tf.mul(t, 0.5))))
        t.dispose()
      }
      ;({ grads, loss } = computeGrads(m, batch, 8))
    }
    expect(loss).toBeLessThan(first.loss * 0.9)
    for (const t of grads.values()) t.dispose()
    m.dispose()
  })

  test('nHeads not a multiple of nKvHeads is refused, naming both', () => {
    expect(() => createModel({ type: 'llama', vocabSize: 16, dModel: 16, nHeads: 4, nKvHeads: 3 })).toThrow(
      /nKvHeads 3.*nHeads 4|nHeads 4.*nKvHeads 3/,
    )
  })
})
