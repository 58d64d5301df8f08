/**
 * @module Hugging Face-style export/import: a directory with `config.json` and `model.safetensors`
 * (or shards `model-00001-of-00003.safetensors`… named by `model.safetensors.index.json`), using
 * the names, layouts and config fields each architecture's definition gives (`hf` in
 * models/registry.ts: GPT2LMHeadModel's for GPT-2, LlamaForCausalLM's for Llama). Float32,
 * float16 and bfloat16 files are read (converted to float32); export writes float32 unless asked
 * for another dtype. The files go to a directory or straight into a finestore transaction, and
 * come back from a directory or straight from a finestore view: no folder in between.
 */
import fs from 'node:fs'
import path from 'node:path'
import type { ArtifactView, Transaction } from '@marin/finestore'
import { LevanterError } from '../errors.js'
import type { ModelConfig } from '../models/config.js'
import { createModel } from '../models/lm.js'
import type { CausalLM } from '../models/lm.js'
import { architectureOf, findArchitecture, registeredArchitectures } from '../models/registry.js'
import type { HfNames } from '../models/registry.js'
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

/** The Hugging Face names of the architecture registered under `type` (BAD_CONFIG when it has none). */
function hfOf(type: string): HfNames<ModelConfig> {
  const hf = architectureOf(type).hf
  if (!hf)
    throw new LevanterError(
      'BAD_CONFIG',
      `architecture "${type}" defines no Hugging Face names (hf); add them to its definition to export or import it`,
    )
  return hf
}

function fromHfConfig(j: Record<string, unknown>, file: string): { config: ModelConfig; hf: HfNames<ModelConfig> } {
  const types = registeredArchitectures().filter((t) => findArchitecture(t)?.hf)
  const type = types.find((t) => findArchitecture(t)!.hf!.modelType === j.model_type)
  if (type === undefined)
    throw new LevanterError(
      'BAD_CHECKPOINT',
      `${file}: model_type ${JSON.stringify(j.model_type)} is not one of the registered architectures' ` +
        `(${types.map((t) => findArchitecture(t)!.hf!.modelType).join(', ')})`,
    )
  const hf = hfOf(type)
  return { config: hf.fromConfig(j, file) as ModelConfig, hf }
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
  const hf = hfOf(model.config.type)
  for (const [name, data] of await model.weights()) {
    const shape = model.param(name).shape
    if (hf.transposed?.(name))
      out.set(name, { shape: [shape[1]!, shape[0]!], data: transpose2d(data, shape[0]!, shape[1]!), dtype: stored })
    else out.set(name, { shape, data, dtype: stored })
  }
  const files = new Map<string, Uint8Array | string>()
  const config = { ...hf.toConfig(model.config), torch_dtype: dtype }
  files.set('config.json', JSON.stringify(config, null, 2) + '\n')
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
 * Build a model from a Hugging Face-style directory or finestore view (config.json's `model_type`
 * picks the registered architecture with those Hugging Face names; one `model.safetensors` or
 * shards named by `model.safetensors.index.json`).
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
  const { config, hf } = fromHfConfig(json as Record<string, unknown>, name('config.json'))
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
  // Headers first (checked, data unread), so that the config is held against the weights before anything of
  // the size it claims is allocated.
  const shapes = new Map<string, readonly number[]>()
  let fileBytes = 0
  for (const f of files) {
    const h = await header(f)
    fileBytes += h.fileSize
    for (const [n, e] of h.entries) shapes.set(n, e.shape)
  }
  const fields = hf.fields
  const stored = (n: string) => [n, ...(hf.aliases?.(n) ?? [])]
  checkModelFits({
    config,
    configFile: name('config.json'),
    weightsFile: wFile,
    field: (k) => fields.get(k) ?? k,
    tensorCount: shapes.size,
    stored: (n) => {
      const s = stored(n)
        .map((k) => shapes.get(k))
        .find((x) => x !== undefined)
      return s && hf.transposed?.(n) && s.length === 2 ? [s[1]!, s[0]!] : s
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
  if (hf.unusedOk) {
    // a tensor the model would not use is refused rather than dropped, unless the architecture says it may go
    const used = new Set(model.specs.map((sp) => sp.name))
    for (const t of tensors.keys()) {
      if (used.has(t) || hf.unusedOk(model.config, t)) continue
      model.dispose()
      throw new LevanterError('BAD_CHECKPOINT', `${wFile}: tensor "${t}" is not used by ${hf.className} as configured`)
    }
  }
  for (const spec of model.specs) {
    const t = stored(spec.name)
      .map((k) => tensors.get(k))
      .find((x) => x !== undefined)
    if (!t) throw new LevanterError('BAD_CHECKPOINT', `${wFile}: tensor "${spec.name}" is missing`)
    const want = spec.shape.reduce((a, b) => a * b, 1)
    if (t.data.length !== want)
      throw new LevanterError(
        'BAD_CHECKPOINT',
        `${wFile}: tensor "${spec.name}" has shape [${t.shape.join(', ')}], ` +
          `expected ${want} values as config.json describes`,
      )
    const data = t.data instanceof Float32Array ? t.data : Float32Array.from(t.data)
    model.set(spec.name, hf.transposed?.(spec.name) ? transpose2d(data, t.shape[0]!, t.shape[1]!) : data)
  }
  return model
}
