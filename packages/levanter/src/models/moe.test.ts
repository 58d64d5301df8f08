/**
 * Mixtral-style mixture of experts (models/moe.ts): a Hugging Face–format checkpoint imports to the logits and the
 * router's load-balancing loss of an independent PyTorch forward (test-fixtures/hf-mixtral/make_fixtures.py),
 * exports back to the same tensors, and trains in one process and on a mesh.
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
  '../../test-fixtures/hf-mixtral/top2-of-4-f32',
)
const reference = JSON.parse(fs.readFileSync(path.join(FIXTURE, 'reference.json'), 'utf8')) as {
  ids: number[]
  aux_loss: number
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

const ids2d = (ids: number[]) => tf.tensor2d(ids, [1, ids.length], 'int32')
const logitsOf = (m: CausalLM, ids: number[]): Float32Array =>
  tf.tidy(() => m.forward(ids2d(ids)).dataSync() as Float32Array)

const client = new LocalClient({ mode: 'inline' })
beforeAll(async () => {
  await initBackend()
})
afterAll(() => client.shutdown())

describe('Mixtral from Hugging Face files', () => {
  test('import: config, logits and router loss equal the independent PyTorch reference', async () => {
    const m = await importHf(FIXTURE)
    expect(m.config).toMatchObject({ type: 'mixtral', nExperts: 4, topK: 2, nKvHeads: 2, routerAuxLossCoef: 0.02 })
    expect(maxDiff(logitsOf(m, reference.ids), reference.logits)).toBeLessThan(2e-4)
    const aux = tf.tidy(() => m.forwardTraining(ids2d(reference.ids)).aux!.dataSync()[0]!)
    expect(reference.aux_loss).toBeGreaterThan(2) // above its floor topK: the routing is uneven here
    expect(Math.abs(aux / 0.02 - reference.aux_loss)).toBeLessThan(1e-4)
    m.dispose()
  })

  test('routing matters: sending every token to other experts changes the logits', async () => {
    const m = await importHf(FIXTURE)
    const gate = 'model.layers.0.block_sparse_moe.gate.weight'
    const w = (await m.weights()).get(gate)!
    m.set(
      gate,
      w.map((v) => -v),
    ) // reverses each token's expert ranking
    expect(maxDiff(logitsOf(m, reference.ids), reference.logits)).toBeGreaterThan(1e-3)
    m.dispose()
  })

  test('export writes the same tensors and config; re-import gives the reference logits', async () => {
    const m = await importHf(FIXTURE)
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lev-mixtral-export-'))
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
    const keys = ['architectures', 'model_type', 'num_local_experts', 'num_experts_per_tok', 'router_aux_loss_coef']
    for (const k of [...keys, 'num_key_value_heads', 'intermediate_size', 'rope_theta'])
      expect(cfg[k], k).toEqual(orig[k])
    const back = await importHf(dir)
    expect(maxDiff(logitsOf(back, reference.ids), reference.logits)).toBeLessThan(2e-4)
    back.dispose()
    m.dispose()
  })

  test('what import cannot honour is refused, naming the field', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lev-mixtral-bad-'))
    fs.copyFileSync(path.join(FIXTURE, 'model.safetensors'), path.join(dir, 'model.safetensors'))
    const cfg = JSON.parse(fs.readFileSync(path.join(FIXTURE, 'config.json'), 'utf8'))
    fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify({ ...cfg, sliding_window: 4096 }))
    await expect(importHf(dir)).rejects.toThrow(/sliding_window is not supported for MixtralForCausalLM/)
    const { num_local_experts: _, ...noExperts } = cfg
    fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify(noExperts))
    await expect(importHf(dir)).rejects.toThrow(/field "num_local_experts" is missing/)
  })

  test('prefill + KV-cache decode steps give the reference logits', async () => {
    const m = await importHf(FIXTURE)
    const { ids, logits } = reference
    const p = await prefill(m, [ids.slice(0, 6)], false)
    expect(maxDiff(p.logits[0]!, logits.slice(5 * V, 6 * V))).toBeLessThan(2e-4)
    const cache = new BatchCache()
    cache.add(p.kv, [6])
    for (let s = 0; s < 3; s++) {
      const out = await decodeStep(m, cache, [ids[6 + s]!])
      expect(maxDiff(out, logits.slice((6 + s) * V, (7 + s) * V))).toBeLessThan(2e-4)
    }
    cache.dispose()
    m.dispose()
  })
})

describe('Mixtral training', () => {
  const config = {
    type: 'mixtral',
    vocabSize: 11,
    seqLen: 8,
    dModel: 16,
    nLayers: 2,
    nHeads: 4,
    nKvHeads: 2,
    intermediateSize: 8,
    nExperts: 4,
    topK: 2,
    routerAuxLossCoef: 0.05,
  } as const
  const tokens = Array.from({ length: 1200 }, (_, i) => ((i * 3) % 10) + (i % 23 === 0 ? 1 : 0))

  async function losses(
    layout: Pick<TrainerConfigInput, 'mesh' | 'fsdp'>,
    steps: number,
    coef: number = config.routerAuxLossCoef,
  ): Promise<number[]> {
    const model = createModel({ ...config, routerAuxLossCoef: coef }, 5)
    const trainer = new Trainer({ learningRate: 3e-2, batchSize: 4, seed: 2, ...layout }, { trackers: [] })
    const dataset = Dataset.fromTokens(tokens, { evalFraction: 0 })
    const r = await withClient(client, () => new Pipeline({ dataset, model, trainer, maxSteps: steps }).run())
    model.dispose()
    return [...r.losses]
  }

  const close = (got: number[], want: number[], what: string) => {
    expect(got).toHaveLength(want.length)
    got.forEach((l, i) => expect(Math.abs(l - want[i]!), `${what} step ${i}`).toBeLessThan(1e-4))
  }

  test('specs: experts split like a dense MLP, the router replicated', () => {
    const by = new Map(specsOf(config).map((s) => [s.name, s]))
    const e = 'model.layers.1.block_sparse_moe.experts.3'
    expect(by.get(`${e}.w1.weight`)).toMatchObject({ shape: [16, 8], shard: 'column' })
    expect(by.get(`${e}.w3.weight`)).toMatchObject({ shape: [16, 8], shard: 'column' })
    expect(by.get(`${e}.w2.weight`)).toMatchObject({ shape: [8, 16], shard: 'row' })
    expect(by.get('model.layers.1.block_sparse_moe.gate.weight')!.shard ?? 'replicated').toBe('replicated')
    expect(by.has('model.layers.1.block_sparse_moe.experts.4.w1.weight')).toBe(false)
  })

  test('the router loss is part of the training loss; loss falls; { data: 2 } matches within 1e-4', async () => {
    const one = await losses({}, 8)
    const without = await losses({}, 1, 0)
    // first step: same weights, so the difference is the router loss (≥ coef·topK, its floor)
    expect(one[0]! - without[0]!).toBeGreaterThanOrEqual(0.05 * 2 - 1e-5)
    expect(one.at(-1)!).toBeLessThan(one[0]! * 0.9)
    close(await losses({ mesh: { data: 2 } }, 8), one, '{ data: 2 }')
  }, 180_000)

  test('{ data: 2 } fsdp and { model: 2 } (router loss on its stages) match one process within 1e-4', async () => {
    const one = await losses({}, 6)
    for (const layout of [{ mesh: { data: 2 }, fsdp: true }, { mesh: { model: 2 } }, { mesh: { data: 2, model: 2 } }])
      close(await losses(layout, 6), one, JSON.stringify(layout))
  }, 180_000)
})
