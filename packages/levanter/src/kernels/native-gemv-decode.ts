/**
 * @module A whole GPT-2 decode step as one native call (native/decode.cc `decodeGpt2`): the step's ~260 tensor ops
 * (LayerNorm, the affine layers, attention over the cache, GELU, the residual adds, reshapes), each with its
 * dispatch and output allocation, become one pass that reads the weights and the KV cache in place on the wasm heap
 * and writes the logits and the grown cache there. The same C++ arithmetic in the same order as the step on tensor
 * ops with the native kernels (the fused kernels' code, the native GEMM for every product), so the logits are the
 * same bits. With `weights: 'bf16'` the products read bf16 copies of the weight matrices instead (converted once,
 * native/gemv-bf16.cc: half the bytes a token reads; activations rounded to bf16 too, float32 sums).
 *
 * It takes the model and cache structurally (kernels/ imports nothing above it): a model with GPT-2's parameters
 * (models/gpt2.ts hands its decode steps here, as its architecture's `decode`) whose parameters are float32 on the
 * wasm heap, a cache with at least one row. Anything else answers undefined and the caller runs the step on tensor
 * ops.
 */
import * as tf from '@tensorflow/tfjs'
import { LevanterError } from '../errors.js'
import { bf16Unavailable, nativeGemm } from './native-gemm.js'
import { nativeKernels } from './native-ops.js'
import { WasmHeap } from './wasm-heap.js'
import type { WasmBackendLike } from './wasm-heap.js'

/** The weights a decode step's products read: the model's float32 tensors, or bf16 copies made once. */
export type DecodeWeights = 'fp32' | 'bf16'

/** The parts of a GPT-2 language model the step reads. */
export type DecodeModel = {
  readonly config: {
    readonly type: string
    readonly vocabSize: number
    readonly seqLen: number
    readonly dModel: number
    readonly nLayers: number
    readonly nHeads: number
    readonly mlpRatio?: number
    readonly layerNormEps?: number
  }
  param(name: string): tf.Tensor
}

/** The parts of a KV cache (models/batch-cache.ts) the step reads and grows: by new tensors a layer (`advance`), or,
 * where the cache brings `storage` ([B, H, capacity, K] a layer, its `width` columns first) and `grew`, in place while
 * there is room (the new column written after the S; a copy into twice the width where there is none). */
export type DecodeCache = {
  readonly layers: readonly { readonly k: tf.Tensor; readonly v: tf.Tensor }[]
  readonly lengths: readonly number[]
  advance(next: { k: tf.Tensor; v: tf.Tensor }[], n?: number): void
  readonly width?: number
  readonly storage?: readonly { readonly k: tf.Tensor; readonly v: tf.Tensor }[]
  grew?(n: number): void
}

type DecodeAddon = {
  decodeGpt2?(buffer: ArrayBuffer, offsets: Float64Array, ints: Int32Array, dims: Float64Array, pack?: object): void
  packBf16?(buffer: ArrayBuffer, offsets: Float64Array, shapes: Float64Array): object
}

const LAYER = ['ln_1.weight', 'ln_1.bias', 'attn.c_attn.weight', 'attn.c_attn.bias', 'attn.c_proj.weight']
const LAYER2 = ['attn.c_proj.bias', 'ln_2.weight', 'ln_2.bias', 'mlp.c_fc.weight', 'mlp.c_fc.bias']
const LAYER3 = ['mlp.c_proj.weight', 'mlp.c_proj.bias']
const LAYER_PARAMS = [...LAYER, ...LAYER2, ...LAYER3]

let fusedOn = true

/** Turns the one-call step off (decode steps then run on tensor ops) or back on; answers the setting before. For
 * comparisons: tests and benches measure a step both ways. */
export function useNativeDecodeStep(on: boolean): boolean {
  const was = fusedOn
  fusedOn = on
  return was
}

function addonHere(): DecodeAddon | undefined {
  if (!fusedOn || !nativeKernels()) return undefined
  const addon = nativeGemm().addon as DecodeAddon | undefined
  return addon?.decodeGpt2 ? addon : undefined
}

/** Why the one-call step cannot run here (backend, addon, switched off), or undefined where it can. */
export function nativeDecodeUnavailable(): string | undefined {
  if (tf.getBackend() !== 'wasm') return `it runs on the wasm backend, this is ${tf.getBackend()}`
  if (!fusedOn) return 'it is turned off (useNativeDecodeStep(false))'
  if (!addonHere())
    return `the native kernels do not run here (${nativeGemm().reason ?? 'an addon without decodeGpt2'})`
  return undefined
}

const heapOf = () => new WasmHeap(tf.backend() as unknown as WasmBackendLike)

function layerNames(l: number): string[] {
  return LAYER_PARAMS.map((n) => `transformer.h.${l}.${n}`)
}

/** The bf16 copies of a model's matrices, made once per set of parameter tensors. */
const packs = new WeakMap<DecodeModel, { ids: object[]; pack: object }>()

function matrices(model: DecodeModel): { names: string[]; shapes: number[] } {
  const { dModel: D, nLayers: L } = model.config,
    F = (model.config.mlpRatio ?? 4) * D
  const names: string[] = [],
    shapes: number[] = []
  for (let l = 0; l < L; l++) {
    const h = `transformer.h.${l}`
    names.push(`${h}.attn.c_attn.weight`, `${h}.attn.c_proj.weight`, `${h}.mlp.c_fc.weight`, `${h}.mlp.c_proj.weight`)
    shapes.push(D, 3 * D, 3 * D, 1, D, D, D, 1, D, F, F, 1, F, D, D, 1)
  }
  // the tied head reads the token table [V, D] as its [D, V] operand
  names.push('transformer.wte.weight')
  shapes.push(D, model.config.vocabSize, 1, D)
  return { names, shapes }
}

/**
 * The bf16 copies of `model`'s weight matrices for {@link nativeDecodeStep} (converted on first use, again only if a
 * parameter tensor was replaced). `BAD_CONFIG` naming why where they cannot be made: a CPU or build without
 * AVX512_BF16, or a model or backend the one-call step does not run.
 */
export function bf16DecodeWeights(model: DecodeModel): object {
  const why = nativeDecodeUnavailable() ?? bf16Unavailable()
  if (why) throw new LevanterError('BAD_CONFIG', `weights 'bf16' needs the native bf16 decode step: ${why}; use fp32`)
  const { names, shapes } = matrices(model)
  const tensors = names.map((n) => model.param(n))
  const ids = tensors.map((t) => t.dataId)
  const have = packs.get(model)
  if (have?.ids.every((id, i) => id === ids[i])) return have.pack
  const backend = tf.backend() as unknown as WasmBackendLike
  const off = tensors.findIndex((t) => t.dtype !== 'float32' || !backend.dataIdMap.get(t.dataId))
  if (off >= 0)
    throw new LevanterError(
      'BAD_CONFIG',
      `weights 'bf16': parameter ${names[off]} is not float32 on the wasm backend's heap; create the model after ` +
        'initBackend() (or use fp32)',
    )
  const heap = heapOf()
  const pack = addonHere()!.packBf16!(
    heap.f32().buffer as ArrayBuffer,
    Float64Array.from(tensors, (t) => heap.offset(t)),
    Float64Array.from(shapes),
  )
  packs.set(model, { ids, pack })
  return pack
}

/**
 * Feeds `tokens[r]` to row r of `cache` at its next position in one native call, grows the cache by that column and
 * answers the logits [B, 1, V] (the caller reads and disposes them); undefined where the step cannot run here
 * ({@link nativeDecodeUnavailable}, or a row already at the model's seqLen: the tensor-op step says why), for the
 * caller to run it on tensor ops. `weights: 'bf16'` reads the bf16 copies ({@link bf16DecodeWeights}).
 */
export function nativeDecodeStep(
  model: DecodeModel,
  cache: DecodeCache,
  tokens: readonly number[],
  o: { readonly weights?: DecodeWeights } = {},
): tf.Tensor | undefined {
  const bf16 = o.weights === 'bf16'
  if (bf16) bf16DecodeWeights(model) // throws BAD_CONFIG where bf16 cannot run
  const addon = addonHere()
  const c = model.config
  const B = cache.lengths.length
  if (!addon || B === 0 || tokens.length !== B) return
  if (
    cache.lengths.some((l) => l + 1 > c.seqLen) ||
    tokens.some((t) => !Number.isInteger(t) || t < 0 || t >= c.vocabSize)
  )
    return
  const D = c.dModel,
    H = c.nHeads,
    L = c.nLayers,
    V = c.vocabSize,
    K = D / H,
    F = (c.mlpRatio ?? 4) * D
  const p = (n: string) => model.param(n)
  const inputs = [p('transformer.wte.weight'), p('transformer.wpe.weight'), p('transformer.ln_f.weight')]
  inputs.push(p('transformer.ln_f.bias'))
  for (let l = 0; l < L; l++) inputs.push(...layerNames(l).map(p))
  const backend = tf.backend() as unknown as WasmBackendLike
  const onHeap = (t: tf.Tensor) => t.dtype === 'float32' && backend.dataIdMap.get(t.dataId) !== undefined
  // float32 and on this backend's heap (a tensor made under another backend is not, until tfjs moves it)
  if (!inputs.every(onHeap)) return
  // a cache that grows in place: the new column written after its S where there is room, else the S columns copied
  // into twice the width (at most seqLen) with the new one after them; other caches into S + 1
  const grows = cache.storage !== undefined && cache.grew !== undefined && cache.width !== undefined
  const past = grows ? cache.storage! : cache.layers
  const S = grows ? cache.width! : past[0]?.k.shape[2]
  if (S === undefined || past.length !== L || !past.every((kv) => onHeap(kv.k) && onHeap(kv.v))) return
  const capPast = past[0]!.k.shape[2]!,
    inPlace = grows && capPast > S
  const capOut = inPlace ? capPast : grows ? Math.max(S + 1, Math.min(c.seqLen, Math.max(2 * S, 16))) : S + 1
  const pack = bf16 ? bf16DecodeWeights(model) : undefined
  const heap = heapOf()
  const make = (shape: number[]) => tf.engine().makeTensorFromTensorInfo(backend.makeOutput(shape, 'float32'))
  const logits = make([B, 1, V])
  const grown = inPlace ? [] : past.map(() => ({ k: make([B, H, capOut, K]), v: make([B, H, capOut, K]) }))
  const offsets = new Float64Array(5 + 16 * L)
  for (let i = 0; i < 4; i++) offsets[i] = heap.offset(inputs[i]!)
  offsets[4] = heap.offset(logits)
  for (let l = 0; l < L; l++) {
    const at = 5 + 16 * l
    for (let i = 0; i < 12; i++) offsets[at + i] = heap.offset(inputs[4 + 12 * l + i]!)
    offsets[at + 12] = heap.offset(past[l]!.k)
    offsets[at + 13] = heap.offset(past[l]!.v)
    offsets[at + 14] = heap.offset(inPlace ? past[l]!.k : grown[l]!.k)
    offsets[at + 15] = heap.offset(inPlace ? past[l]!.v : grown[l]!.v)
  }
  const ints = Int32Array.from([...tokens, ...cache.lengths])
  const eps = c.layerNormEps ?? 1e-5
  const dims = Float64Array.from(grows ? [B, S, D, H, L, F, V, eps, capPast, capOut] : [B, S, D, H, L, F, V, eps])
  try {
    // the heap's buffer after the allocations above (they may have grown it)
    addon.decodeGpt2!(heap.f32().buffer as ArrayBuffer, offsets, ints, dims, pack)
  } catch (err) {
    tf.dispose([logits, ...grown.flatMap((g) => [g.k, g.v])])
    throw err
  }
  if (inPlace) cache.grew!(1)
  else cache.advance(grown, 1)
  return logits
}
