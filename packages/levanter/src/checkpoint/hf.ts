/**
 * @module Hugging Face-style export/import: a directory with `config.json` and `model.safetensors`
 * (or shards `model-00001-of-00003.safetensors`… named by `model.safetensors.index.json`), using
 * GPT2LMHeadModel's names and layouts for gpt2 (Conv1D weights are [in, out], as here) and
 * LlamaForCausalLM's for llama (nn.Linear weights are [out, in]: transposed on the way out and in;
 * grouped-query attention, a tied head and `rope_scaling` linear/llama3 included). Float32,
 * float16 and bfloat16 files are read (converted to float32); export writes float32 unless asked
 * for another dtype. The files go to a directory or straight into a finestore transaction, and
 * come back from a directory or straight from a finestore view: no folder in between.
 */
import fs from 'node:fs'
import path from 'node:path'
import type { ArtifactView, Transaction } from '@marin/finestore'
import { LevanterError } from '../errors.js'
import { llamaHidden, llamaKvHeads } from '../models/config.js'
import type { ModelConfig, RopeScaling } from '../models/config.js'
import { createModel } from '../models/lm.js'
import type { CausalLM } from '../models/lm.js'
import { checkModelFits } from './model-fit.js'
import { readHeaderFromFile } from './read-header.js'
import { decodeSafetensors, encodeSafetensors, readSafetensorsHeader } from './safetensors.js'
import type { SafeTensor, StoredDtype } from './safetensors.js'

/** How exported weights are stored: `torch_dtype` in config.json. */
export type HfDtype = 'float32' | 'float16' | 'bfloat16'
const STORED: Record<HfDtype, StoredDtype> = { float32: 'F32', float16: 'F16', bfloat16: 'BF16' }

export type ExportHfOptions = {
  /** @default 'float32' */
  readonly dtype?: HfDtype
  /** Split the weights into shards of at most this many bytes (a tensor larger than that gets a shard of its own),
   * with `model.safetensors.index.json`; @default one `model.safetensors` */
  readonly maxShardBytes?: number
}

const INDEX = 'model.safetensors.index.json'

/** Our config keys as config.json spells them, to name the field a refusal is about. */
const HF_FIELDS: Readonly<Record<'gpt2' | 'llama', ReadonlyMap<string, string>>> = {
  gpt2: new Map([
    ['vocabSize', 'vocab_size'],
    ['seqLen', 'n_positions'],
    ['dModel', 'n_embd'],
    ['nLayers', 'n_layer'],
    ['nHeads', 'n_head'],
    ['mlpRatio', 'n_inner'],
    ['layerNormEps', 'layer_norm_epsilon'],
    ['initStd', 'initializer_range'],
  ]),
  llama: new Map([
    ['vocabSize', 'vocab_size'],
    ['seqLen', 'max_position_embeddings'],
    ['dModel', 'hidden_size'],
    ['nLayers', 'num_hidden_layers'],
    ['nHeads', 'num_attention_heads'],
    ['intermediateSize', 'intermediate_size'],
    ['nKvHeads', 'num_key_value_heads'],
    ['rmsNormEps', 'rms_norm_eps'],
    ['ropeTheta', 'rope_theta'],
    ['tieWordEmbeddings', 'tie_word_embeddings'],
    ['ropeScaling', 'rope_scaling'],
    ['initStd', 'initializer_range'],
  ]),
}

export type ImportHfOptions = {
  /** Refuse a model that needs more bytes than this to load; @default 75% of the free memory (model-fit.ts) */
  readonly maxBytes?: number
}

/** [r, c] row-major → [c, r]. */
function transpose2d(d: Float32Array, r: number, c: number): Float32Array {
  const out = new Float32Array(d.length)
  for (let i = 0; i < r; i++) for (let j = 0; j < c; j++) out[j * r + i] = d[i * c + j]!
  return out
}

// Llama parameters stored [in, out] here and [out, in] by Hugging Face.
const isLinear = (name: string) => /(_proj|lm_head)\.weight$/.test(name)

function hfRopeScaling(r: RopeScaling): Record<string, unknown> {
  if (r.type === 'linear') return { rope_type: 'linear', factor: r.factor }
  return {
    rope_type: 'llama3',
    factor: r.factor,
    low_freq_factor: r.lowFreqFactor,
    high_freq_factor: r.highFreqFactor,
    original_max_position_embeddings: r.originalMaxPositionEmbeddings,
  }
}

function fromHfRopeScaling(j: unknown, file: string): RopeScaling | undefined {
  if (j === undefined || j === null) return undefined
  const r = j as Record<string, unknown>
  const kind = r.rope_type ?? r.type
  const n = (k: string) => {
    if (typeof r[k] !== 'number')
      throw new LevanterError('BAD_CHECKPOINT', `${file}: field "rope_scaling.${k}" is missing or not a number`)
    return r[k] as number
  }
  if (kind === 'default') return undefined
  if (kind === 'linear') return { type: 'linear', factor: n('factor') }
  if (kind === 'llama3')
    return {
      type: 'llama3',
      factor: n('factor'),
      lowFreqFactor: n('low_freq_factor'),
      highFreqFactor: n('high_freq_factor'),
      originalMaxPositionEmbeddings: n('original_max_position_embeddings'),
    }
  throw new LevanterError(
    'BAD_CHECKPOINT',
    `${file}: rope_scaling type ${JSON.stringify(kind)} is not supported (linear and llama3 are)`,
  )
}

function hfConfig(c: ModelConfig, dtype: HfDtype): Record<string, unknown> {
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
      torch_dtype: dtype,
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
    num_key_value_heads: llamaKvHeads(c),
    hidden_act: 'silu',
    rms_norm_eps: c.rmsNormEps,
    rope_theta: c.ropeTheta,
    ...(c.ropeScaling ? { rope_scaling: hfRopeScaling(c.ropeScaling) } : {}),
    initializer_range: c.initStd,
    tie_word_embeddings: c.tieWordEmbeddings ?? false,
    torch_dtype: dtype,
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
    const kv = j.num_key_value_heads ?? j.num_attention_heads
    if (typeof kv !== 'number')
      throw new LevanterError('BAD_CHECKPOINT', `${file}: field "num_key_value_heads" is not a number`)
    if (j.tie_word_embeddings !== undefined && typeof j.tie_word_embeddings !== 'boolean')
      throw new LevanterError('BAD_CHECKPOINT', `${file}: field "tie_word_embeddings" is not true or false`)
    const ropeScaling = fromHfRopeScaling(j.rope_scaling, file)
    const headDim = n('hidden_size') / n('num_attention_heads')
    if (j.head_dim !== undefined && j.head_dim !== null && j.head_dim !== headDim)
      throw new LevanterError(
        'BAD_CHECKPOINT',
        `${file}: head_dim ${String(j.head_dim)} differs from hidden_size / num_attention_heads = ${headDim}; ` +
          `only that head size is supported`,
      )
    for (const k of ['attention_bias', 'mlp_bias'])
      if (j[k] === true) throw new LevanterError('BAD_CHECKPOINT', `${file}: ${k} = true is not supported (no biases)`)
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
      ...(kv !== n('num_attention_heads') ? { nKvHeads: kv } : {}),
      ...(j.tie_word_embeddings ? { tieWordEmbeddings: true } : {}),
      ...(ropeScaling ? { ropeScaling } : {}),
    }
  }
  throw new LevanterError('BAD_CHECKPOINT', `${file}: model_type ${JSON.stringify(j.model_type)} is not gpt2 or llama`)
}

/** Tensors in order → shards of at most `max` bytes each (a larger tensor alone in its own). */
function shard(tensors: Map<string, SafeTensor>, bytesPer: number, max: number): Map<string, SafeTensor>[] {
  const shards: Map<string, SafeTensor>[] = []
  let cur = new Map<string, SafeTensor>(),
    size = 0
  for (const [name, t] of tensors) {
    const b = t.data.length * bytesPer
    if (cur.size && size + b > max) {
      shards.push(cur)
      cur = new Map()
      size = 0
    }
    cur.set(name, t)
    size += b
  }
  if (cur.size) shards.push(cur)
  return shards
}

/**
 * Write `config.json` and `model.safetensors` (or shards and their index) into the directory `to`,
 * or into the finestore transaction `to` (its commit holds them).
 * @example await store.commit('models/gpt-small', (txn) => exportHf(model, txn))
 * @example await exportHf(model, dir, { dtype: 'bfloat16', maxShardBytes: 2 ** 30 })
 */
export async function exportHf(
  model: CausalLM,
  to: string | Transaction,
  options: ExportHfOptions = {},
): Promise<void> {
  const dtype = options.dtype ?? 'float32'
  if (!(dtype in STORED))
    throw new LevanterError(
      'BAD_CONFIG',
      `exportHf: dtype ${JSON.stringify(dtype)} is not float32, float16 or bfloat16`,
    )
  const stored = STORED[dtype]
  const out = new Map<string, SafeTensor>()
  const llama = model.config.type === 'llama'
  for (const [name, data] of await model.weights()) {
    const shape = model.param(name).shape
    if (llama && isLinear(name))
      out.set(name, { shape: [shape[1]!, shape[0]!], data: transpose2d(data, shape[0]!, shape[1]!), dtype: stored })
    else out.set(name, { shape, data, dtype: stored })
  }
  const files = new Map<string, Uint8Array | string>()
  files.set('config.json', JSON.stringify(hfConfig(model.config, dtype), null, 2) + '\n')
  const max = options.maxShardBytes
  if (max === undefined) files.set('model.safetensors', encodeSafetensors(out, { format: 'pt' }))
  else {
    if (!(max > 0)) throw new LevanterError('BAD_CONFIG', `exportHf: maxShardBytes ${max} must be a positive number`)
    const bytesPer = stored === 'F32' ? 4 : 2
    const shards = shard(out, bytesPer, max)
    const weightMap: Record<string, string> = {}
    let total = 0
    shards.forEach((part, i) => {
      const file = `model-${String(i + 1).padStart(5, '0')}-of-${String(shards.length).padStart(5, '0')}.safetensors`
      files.set(file, encodeSafetensors(part, { format: 'pt' }))
      for (const [name, t] of part) {
        weightMap[name] = file
        total += t.data.length * bytesPer
      }
    })
    files.set(INDEX, JSON.stringify({ metadata: { total_size: total }, weight_map: weightMap }, null, 2) + '\n')
  }
  if (typeof to !== 'string') {
    for (const [f, bytes] of files) await to.put(f, bytes)
    return
  }
  fs.mkdirSync(to, { recursive: true })
  for (const [f, bytes] of files) fs.writeFileSync(path.join(to, f), bytes)
}

/**
 * Build a model from a Hugging Face-style directory or finestore view (GPT2LMHeadModel or
 * LlamaForCausalLM; one `model.safetensors` or shards named by `model.safetensors.index.json`).
 */
export async function importHf(from: string | ArtifactView, options: ImportHfOptions = {}): Promise<CausalLM> {
  const where = typeof from === 'string' ? from : from.ref
  const name = (f: string) => (typeof from === 'string' ? path.join(from, f) : `${where} ${f}`)
  const has = (f: string) => (typeof from === 'string' ? fs.existsSync(path.join(from, f)) : from.has(f))
  const sharded = !has('model.safetensors') && has(INDEX)
  if (!has('config.json') || (!has('model.safetensors') && !sharded))
    throw new LevanterError(
      'CHECKPOINT_NOT_FOUND',
      `${where}: needs config.json and model.safetensors (or ${INDEX} and its shards)`,
    )
  const read = async (f: string) =>
    typeof from === 'string' ? new Uint8Array(fs.readFileSync(path.join(from, f))) : from.read(f)
  // A file from a view is read whole once (finestore verifies blobs only whole); from a folder, its header alone
  // is read before the config is checked, and its data after.
  const whole = new Map<string, Uint8Array>()
  const header = async (f: string) => {
    if (typeof from === 'string') return readHeaderFromFile(path.join(from, f))
    const bytes = await from.read(f)
    whole.set(f, bytes)
    return { ...readSafetensorsHeader(bytes, name(f)), fileSize: bytes.length }
  }
  let json: unknown
  try {
    json = JSON.parse(new TextDecoder().decode(await read('config.json')))
  } catch (err) {
    if (!(err instanceof SyntaxError)) throw err
    throw new LevanterError('BAD_CONFIG', `${name('config.json')}: not JSON (${err.message}); fix or replace the file`)
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json))
    throw new LevanterError('BAD_CONFIG', `${name('config.json')}: not a JSON object`)
  const config = fromHfConfig(json as Record<string, unknown>, name('config.json'))
  // tensor name → the file that holds it
  const fileOf = new Map<string, string>()
  if (sharded) {
    let index: { weight_map?: Record<string, unknown> }
    try {
      index = JSON.parse(new TextDecoder().decode(await read(INDEX)))
    } catch (_err) {
      throw new LevanterError('BAD_CHECKPOINT', `${name(INDEX)}: is not JSON`)
    }
    if (!index?.weight_map || typeof index.weight_map !== 'object')
      throw new LevanterError('BAD_CHECKPOINT', `${name(INDEX)}: has no "weight_map" object`)
    for (const [t, f] of Object.entries(index.weight_map)) {
      if (typeof f !== 'string' || f.includes('/') || f.includes('\\') || f.startsWith('.'))
        throw new LevanterError(
          'BAD_CHECKPOINT',
          `${name(INDEX)}: tensor "${t}" maps to ${JSON.stringify(f)}, not a file name`,
        )
      fileOf.set(t, f)
    }
    for (const f of new Set(fileOf.values()))
      if (!has(f))
        throw new LevanterError('CHECKPOINT_NOT_FOUND', `${name(f)}: shard named by ${INDEX} is missing; download it`)
  }
  const files = sharded ? [...new Set(fileOf.values())] : ['model.safetensors']
  const wFile = sharded ? name(INDEX) : name('model.safetensors')
  const llama = config.type === 'llama'
  // Headers first (checked, data unread), so that the config is held against the weights before anything of
  // the size it claims is allocated.
  const shapes = new Map<string, readonly number[]>()
  let fileBytes = 0
  for (const f of files) {
    const h = await header(f)
    fileBytes += h.fileSize
    for (const [n, e] of h.entries) shapes.set(n, e.shape)
  }
  const fields = HF_FIELDS[config.type]
  checkModelFits({
    config,
    configFile: name('config.json'),
    weightsFile: wFile,
    field: (k) => fields.get(k) ?? k,
    tensorCount: shapes.size,
    stored: (n) => {
      // GPT-2 files from the hub may lack the "transformer." prefix; Llama's linear weights are [out, in] there.
      const s = shapes.get(n) ?? shapes.get(n.replace(/^transformer\./, ''))
      return s && llama && isLinear(n) && s.length === 2 ? [s[1]!, s[0]!] : s
    },
    fileBytes,
    ...(options.maxBytes === undefined ? {} : { maxBytes: options.maxBytes }),
  })
  const tensors = new Map<string, SafeTensor>()
  for (const f of files) {
    const bytes = whole.get(f) ?? (await read(f))
    whole.delete(f)
    for (const [n, t] of decodeSafetensors(bytes, name(f)).tensors) tensors.set(n, t)
  }
  const model = createModel(config)
  if (llama) {
    // a Llama tensor the model would not use (a bias, an extra head) is refused rather than dropped
    const used = new Set(model.specs.map((sp) => sp.name))
    for (const t of tensors.keys()) {
      const extra = !used.has(t) && !/\.rotary_emb\.inv_freq$/.test(t)
      if (!extra || (t === 'lm_head.weight' && config.tieWordEmbeddings)) continue
      model.dispose()
      throw new LevanterError('BAD_CHECKPOINT', `${wFile}: tensor "${t}" is not used by LlamaForCausalLM as configured`)
    }
  }
  for (const spec of model.specs) {
    // GPT-2 files from the hub may lack the "transformer." prefix.
    const t = tensors.get(spec.name) ?? tensors.get(spec.name.replace(/^transformer\./, ''))
    if (!t) throw new LevanterError('BAD_CHECKPOINT', `${wFile}: tensor "${spec.name}" is missing`)
    const want = spec.shape.reduce((a, b) => a * b, 1)
    if (t.data.length !== want)
      throw new LevanterError(
        'BAD_CHECKPOINT',
        `${wFile}: tensor "${spec.name}" has shape [${t.shape.join(', ')}], ` +
          `expected ${want} values as config.json describes`,
      )
    const data = t.data instanceof Float32Array ? t.data : Float32Array.from(t.data)
    model.set(spec.name, llama && isLinear(spec.name) ? transpose2d(data, t.shape[0]!, t.shape[1]!) : data)
  }
  return model
}
