/**
 * @module Hugging Face-style export/import: a directory with `config.json` and `model.safetensors`,
 * using GPT2LMHeadModel's names and layouts for gpt2 (Conv1D weights are [in, out], as here) and
 * LlamaForCausalLM's for llama (nn.Linear weights are [out, in]: transposed on the way out and in).
 * The two files go to a directory or straight into a finestore transaction, and come back from a
 * directory or straight from a finestore view: no folder in between.
 */
import fs from 'node:fs'
import path from 'node:path'
import type { ArtifactView, Transaction } from '@marin/finestore'
import { LevanterError } from '../errors.js'
import { llamaHidden } from '../models/config.js'
import type { ModelConfig } from '../models/config.js'
import { createModel } from '../models/lm.js'
import type { CausalLM } from '../models/lm.js'
import { decodeSafetensors, encodeSafetensors } from './safetensors.js'
import type { SafeTensor } from './safetensors.js'

/** [r, c] row-major → [c, r]. */
function transpose2d(d: Float32Array, r: number, c: number): Float32Array {
  const out = new Float32Array(d.length)
  for (let i = 0; i < r; i++) for (let j = 0; j < c; j++) out[j * r + i] = d[i * c + j]!
  return out
}

// Llama parameters stored [in, out] here and [out, in] by Hugging Face.
const isLinear = (name: string) => /(_proj|lm_head)\.weight$/.test(name)

function hfConfig(c: ModelConfig): Record<string, unknown> {
  if (c.type === 'gpt2') {
    return {
      architectures: ['GPT2LMHeadModel'],
      model_type: 'gpt2',
      vocab_size: c.vocabSize,
      n_positions: c.seqLen,
      n_ctx: c.seqLen,
      n_embd: c.dModel,
      n_layer: c.nLayers,
      n_head: c.nHeads,
      n_inner: c.mlpRatio * c.dModel,
      activation_function: 'gelu_new',
      layer_norm_epsilon: c.layerNormEps,
      initializer_range: c.initStd,
      tie_word_embeddings: true,
      torch_dtype: 'float32',
    }
  }
  return {
    architectures: ['LlamaForCausalLM'],
    model_type: 'llama',
    vocab_size: c.vocabSize,
    max_position_embeddings: c.seqLen,
    hidden_size: c.dModel,
    intermediate_size: llamaHidden(c),
    num_hidden_layers: c.nLayers,
    num_attention_heads: c.nHeads,
    num_key_value_heads: c.nHeads,
    hidden_act: 'silu',
    rms_norm_eps: c.rmsNormEps,
    rope_theta: c.ropeTheta,
    initializer_range: c.initStd,
    tie_word_embeddings: false,
    torch_dtype: 'float32',
  }
}

function fromHfConfig(j: Record<string, unknown>, file: string): ModelConfig {
  const n = (k: string) => {
    if (typeof j[k] !== 'number')
      throw new LevanterError('BAD_CHECKPOINT', `${file}: field "${k}" is missing or not a number`)
    return j[k] as number
  }
  if (j.model_type === 'gpt2') {
    const inner = typeof j.n_inner === 'number' ? j.n_inner : 4 * n('n_embd')
    return {
      type: 'gpt2',
      vocabSize: n('vocab_size'),
      seqLen: n('n_positions'),
      dModel: n('n_embd'),
      nLayers: n('n_layer'),
      nHeads: n('n_head'),
      mlpRatio: inner / n('n_embd'),
      layerNormEps: n('layer_norm_epsilon'),
      initStd: (j.initializer_range as number) ?? 0.02,
    }
  }
  if (j.model_type === 'llama') {
    if ((j.num_key_value_heads ?? j.num_attention_heads) !== j.num_attention_heads) {
      throw new LevanterError(
        'BAD_CHECKPOINT',
        `${file}: grouped-query attention (num_key_value_heads ≠ num_attention_heads) is not supported`,
      )
    }
    return {
      type: 'llama',
      vocabSize: n('vocab_size'),
      seqLen: n('max_position_embeddings'),
      dModel: n('hidden_size'),
      nLayers: n('num_hidden_layers'),
      nHeads: n('num_attention_heads'),
      intermediateSize: n('intermediate_size'),
      rmsNormEps: n('rms_norm_eps'),
      ropeTheta: (j.rope_theta as number) ?? 10_000,
      initStd: (j.initializer_range as number) ?? 0.02,
    }
  }
  throw new LevanterError('BAD_CHECKPOINT', `${file}: model_type ${JSON.stringify(j.model_type)} is not gpt2 or llama`)
}

/**
 * Write `config.json` and `model.safetensors` into the directory `to`, or into the finestore
 * transaction `to` (its commit holds them).
 * @example await store.commit('models/gpt-small', (txn) => exportHf(model, txn))
 */
export async function exportHf(model: CausalLM, to: string | Transaction): Promise<void> {
  const out = new Map<string, SafeTensor>()
  const llama = model.config.type === 'llama'
  for (const [name, data] of await model.weights()) {
    const shape = model.param(name).shape
    if (llama && isLinear(name))
      out.set(name, { shape: [shape[1]!, shape[0]!], data: transpose2d(data, shape[0]!, shape[1]!) })
    else out.set(name, { shape, data })
  }
  const weights = encodeSafetensors(out, { format: 'pt' }),
    config = JSON.stringify(hfConfig(model.config), null, 2) + '\n'
  if (typeof to !== 'string') {
    await to.put('model.safetensors', weights)
    await to.put('config.json', config)
    return
  }
  fs.mkdirSync(to, { recursive: true })
  fs.writeFileSync(path.join(to, 'model.safetensors'), weights)
  fs.writeFileSync(path.join(to, 'config.json'), config)
}

/** Build a model from a Hugging Face-style directory or finestore view (GPT2LMHeadModel or LlamaForCausalLM). */
export async function importHf(from: string | ArtifactView): Promise<CausalLM> {
  const where = typeof from === 'string' ? from : from.ref
  const cfgFile = typeof from === 'string' ? path.join(from, 'config.json') : `${where} config.json`
  const wFile = typeof from === 'string' ? path.join(from, 'model.safetensors') : `${where} model.safetensors`
  const has = (f: string) => (typeof from === 'string' ? fs.existsSync(path.join(from, f)) : from.has(f))
  if (!has('config.json') || !has('model.safetensors'))
    throw new LevanterError('CHECKPOINT_NOT_FOUND', `${where}: needs config.json and model.safetensors`)
  const read = async (f: string) =>
    typeof from === 'string' ? new Uint8Array(fs.readFileSync(path.join(from, f))) : from.read(f)
  const config = fromHfConfig(JSON.parse(new TextDecoder().decode(await read('config.json'))), cfgFile)
  const model = createModel(config)
  const { tensors } = decodeSafetensors(await read('model.safetensors'), wFile)
  const llama = config.type === 'llama'
  for (const spec of model.specs) {
    // GPT-2 files from the hub may lack the "transformer." prefix.
    const t = tensors.get(spec.name) ?? tensors.get(spec.name.replace(/^transformer\./, ''))
    if (!t) throw new LevanterError('BAD_CHECKPOINT', `${wFile}: tensor "${spec.name}" is missing`)
    const data = t.data instanceof Float32Array ? t.data : Float32Array.from(t.data)
    model.set(spec.name, llama && isLinear(spec.name) ? transpose2d(data, t.shape[0]!, t.shape[1]!) : data)
  }
  return model
}
