import * as tf from '@tensorflow/tfjs'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { beforeAll, expect, test } from 'vitest'
import { initBackend } from '../backend.js'
import { createModel } from '../models/lm.js'
import { exportHf, importHf } from './hf.js'
import { decodeSafetensors } from './safetensors.js'

const tiny = { vocabSize: 13, seqLen: 8, dModel: 8, nLayers: 1, nHeads: 2 }
/** Qwen3 with grouped-query attention (4 query heads over 2 key/value heads) and heads of 6, not dModel / nHeads. */
const configOf = (type: 'gpt2' | 'llama' | 'qwen3') =>
  type === 'qwen3' ? { type, ...tiny, nHeads: 4, nKvHeads: 2, headDim: 6 } : { type, ...tiny }

beforeAll(async () => {
  await initBackend()
})

test.each(['gpt2', 'llama', 'qwen3'] as const)(
  '%s: export uses Hugging Face names and layouts, import restores the same logits',
  async (type) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), `lev-hf-${type}-`))
    const m = createModel(configOf(type), 4)
    await exportHf(m, dir)
    const cfg = JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8'))
    const { tensors } = decodeSafetensors(new Uint8Array(fs.readFileSync(path.join(dir, 'model.safetensors'))))
    if (type === 'gpt2') {
      expect(cfg.architectures).toEqual(['GPT2LMHeadModel'])
      expect(tensors.get('transformer.h.0.attn.c_attn.weight')!.shape).toEqual([8, 24]) // Conv1D: [in, out]
      expect(tensors.get('transformer.h.0.mlp.c_fc.weight')!.shape).toEqual([8, 32])
      expect(tensors.has('lm_head.weight')).toBe(false) // tied to wte
    } else if (type === 'qwen3') {
      expect(cfg).toMatchObject({
        architectures: ['Qwen3ForCausalLM'],
        num_attention_heads: 4,
        num_key_value_heads: 2,
        head_dim: 6,
      })
      const q = tensors.get('model.layers.0.self_attn.q_proj.weight')!
      expect(q.shape).toEqual([24, 8]) // nn.Linear: [nHeads·headDim, dModel]
      expect(tensors.get('model.layers.0.self_attn.k_proj.weight')!.shape).toEqual([12, 8]) // [nKvHeads·headDim, …]
      expect(tensors.get('model.layers.0.self_attn.o_proj.weight')!.shape).toEqual([8, 24])
      expect(tensors.get('model.layers.0.self_attn.q_norm.weight')!.shape).toEqual([6]) // one per head dimension
      expect(tensors.get('model.layers.0.self_attn.k_norm.weight')!.shape).toEqual([6])
      expect(tensors.get('lm_head.weight')!.shape).toEqual([13, 8]) // untied
      const ours = m.param('model.layers.0.self_attn.q_proj.weight').arraySync() as number[][]
      expect(q.data[1 * 8 + 2]).toBe(ours[2]![1]) // hf[out=1][in=2] = ours[in=2][out=1]
    } else {
      expect(cfg.architectures).toEqual(['LlamaForCausalLM'])
      const q = tensors.get('model.layers.0.self_attn.q_proj.weight')!
      expect(q.shape).toEqual([8, 8])
      expect(tensors.get('model.layers.0.mlp.gate_proj.weight')!.shape).toEqual([32, 8]) // nn.Linear: [out, in]
      expect(tensors.get('lm_head.weight')!.shape).toEqual([13, 8])
      const ours = m.param('model.layers.0.self_attn.q_proj.weight').arraySync() as number[][]
      expect(q.data[1 * 8 + 2]).toBe(ours[2]![1]) // hf[out=1][in=2] = ours[in=2][out=1]
    }
    const back = await importHf(dir)
    const ids = tf.tensor2d([[1, 2, 3, 12]], [1, 4], 'int32')
    expect(Array.from(back.forward(ids).dataSync())).toEqual(Array.from(m.forward(ids).dataSync()))
  },
)
