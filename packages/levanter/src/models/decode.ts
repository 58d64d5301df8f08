/**
 * @module Batched decoding, each row at its own position: what `generate` and a continuous-batching
 * server run. `prefill`: several prompts of different lengths, left-padded to one width, in one
 * pass; their keys/values come out right-aligned, the layout `BatchCache` keeps. `prefillChunk`:
 * the next tokens of every row of a cache, at the positions after its cached ones, attending to
 * the cache and causally among themselves, so a long prompt is prefilled a chunk at a time.
 * `decodeStep`: B sequences, each at its own position, advance by one token over the shared cache (on the
 * architecture's own faster step where it brings one, registry.ts `decode`: GPT-2's one native call)
 * (weight products over [B, D], attention over [B, H, 1, S] with each row's padding masked: one
 * native kernel per layer where those run, told the rows' cached lengths). All are the model's own
 * forward pass (`CausalLM.forwardPlaced`), so a row's logits equal the full forward's at its
 * position (a prefill bit for bit on wasm, where products of at most 4 rows keep the blocked
 * GEMM's operation order; a decode step within 1e-6, its attention summed in the kernel's order).
 * Logits are read with `await tensor.data()`, which every backend serves (webgpu only that way)
 * with the same values as a synchronous read.
 */
import * as tf from '@tensorflow/tfjs'
import { LevanterError } from '../errors.js'
import type { BatchCache, LayerKv } from './batch-cache.js'
import type { Placement } from './layers.js'
import type { CausalLM } from './lm.js'
import { findArchitecture } from './registry.js'
import type { ArchitectureDecode } from './registry.js'

function run(
  model: CausalLM,
  ids: readonly (readonly number[])[],
  at: Placement,
  past: readonly LayerKv[] | undefined,
  lastOnly: boolean,
): { logits: tf.Tensor; kv: LayerKv[] } {
  return tf.tidy(() => {
    const B = ids.length,
      T = ids[0]!.length
    return model.forwardPlaced(tf.tensor2d(ids.flat(), [B, T], 'int32'), at, past, lastOnly)
  })
}

/** The values of `t`, read asynchronously; `t` is disposed. */
async function readAndDispose(t: tf.Tensor): Promise<Float32Array> {
  try {
    return (await t.data()) as Float32Array
  } finally {
    t.dispose()
  }
}

/** Each row's logits out of [B·n·V] values: all n positions, or the last one. */
function splitRows(d: Float32Array, B: number, n: number, V: number, allPositions: boolean): Float32Array[] {
  return Array.from({ length: B }, (_, r) =>
    allPositions ? d.slice(r * n * V, (r + 1) * n * V) : d.slice(r * V, (r + 1) * V),
  )
}

/**
 * Feeds `tokens[r]` at absolute position `lengths[r]` to row r of `cache`, extends the cache by one
 * column, and returns the next-token logits of every row, [B·V].
 */
export async function decodeStep(model: CausalLM, cache: BatchCache, tokens: readonly number[]): Promise<Float32Array> {
  // the architecture's own faster step where it brings one and it runs here (the same logits), else tensor ops
  const fast = findArchitecture(model.config.type)?.decode as ArchitectureDecode<CausalLM, BatchCache, tf.Tensor>
  return readAndDispose(fast?.step(model, cache, tokens, {}) ?? decodeStepOnDevice(model, cache, tokens))
}

/** {@link decodeStep} with the logits left on the device, [B, 1, V] (the caller reads and disposes them). */
export function decodeStepOnDevice(model: CausalLM, cache: BatchCache, tokens: readonly number[]): tf.Tensor {
  if (tokens.length !== cache.rows)
    throw new LevanterError(
      'BAD_SHAPE',
      `decodeStep: ${tokens.length} tokens for ${cache.rows} cache rows; give one token per row`,
    )
  return extendOnDevice(
    model,
    cache,
    tokens.map((t) => [t]),
    false,
    'decodeStep',
  )
}

/**
 * Feeds `chunks[r]` to row r of `cache` at positions lengths[r]…lengths[r]+n-1 (every chunk n tokens: the rows of a
 * cache advance together), each token attending to the row's cached positions and to the chunk's tokens up to
 * itself; extends the cache by n columns. An empty cache takes the chunks as its rows' first tokens, of any
 * lengths (as {@link prefill}). Returns each row's logits: [n·V] over the chunk's positions when `allPositions`, else
 * [V] for its last. Prefilling a prompt chunk by chunk gives the logits and cache of prefilling it whole (tested
 * bit for bit), with each pass as long as one chunk.
 */
export async function prefillChunk(
  model: CausalLM,
  cache: BatchCache,
  chunks: readonly (readonly number[])[],
  allPositions: boolean,
): Promise<Float32Array[]> {
  if (cache.rows === 0) {
    const p = prefillOnDevice(model, chunks, allPositions)
    cache.add(
      p.kv,
      chunks.map((c) => c.length),
    )
    return p.split(await readAndDispose(p.logits))
  }
  if (chunks.length !== cache.rows)
    throw new LevanterError(
      'BAD_SHAPE',
      `prefillChunk: ${chunks.length} chunks for ${cache.rows} cache rows; give one chunk per row`,
    )
  const n = chunks[0]!.length
  chunks.forEach((c, r) => {
    if (c.length !== n)
      throw new LevanterError(
        'BAD_SHAPE',
        `prefillChunk: a chunk of ${c.length} token${c.length === 1 ? '' : 's'} for row ${r} but ${n} tokens for ` +
          `row 0; the rows of a cache advance together, so give chunks of equal lengths (or prefill rows in caches ` +
          `of their own and join them with BatchCache.absorb)`,
      )
  })
  const logits = extendOnDevice(model, cache, chunks, allPositions, 'prefillChunk')
  return splitRows(await readAndDispose(logits), chunks.length, n, model.config.vocabSize, allPositions)
}

/** Runs `chunks` (n tokens each, one per row) after each row's cached positions and extends `cache` by n columns:
 * logits [B, n, V] ([B, 1, V] unless `allPositions`). */
function extendOnDevice(
  model: CausalLM,
  cache: BatchCache,
  chunks: readonly (readonly number[])[],
  allPositions: boolean,
  what: string,
): tf.Tensor {
  const n = chunks[0]!.length,
    seqLen = model.config.seqLen
  if (n === 0) throw new LevanterError('BAD_SHAPE', `${what}: the chunks are empty; give at least one token per row`)
  const over = cache.lengths.findIndex((l) => l + n > seqLen)
  if (over >= 0) {
    const len = cache.lengths[over]!
    throw new LevanterError(
      'BAD_SHAPE',
      `${what}: row ${over} holds ${len} positions; a chunk of ${n} token${n === 1 ? '' : 's'} would reach ` +
        `${len + n}, past the model's seqLen ${seqLen}; ` +
        (len >= seqLen ? 'end that sequence first' : `give at most ${seqLen - len} tokens`),
    )
  }
  const at = {
    positions: cache.lengths.map((l) => Array.from({ length: n }, (_, t) => l + t)),
    bias: cache.extendBias(n),
    cached: cache.lengths,
  }
  let out: { logits: tf.Tensor; kv: LayerKv[] }
  try {
    out = run(model, chunks, at, cache.layers.length ? cache.layers : undefined, !allPositions)
  } finally {
    at.bias.dispose()
  }
  cache.advance(out.kv, n)
  return out.logits
}

/**
 * Runs several prompts in one pass. Returns each prompt's logits ([T_r·V] over its own positions
 * when `allPositions`, else [V] for its last position) and the keys/values of all rows, [B, H, W, K]
 * right-aligned (W the longest prompt), ready for `BatchCache.add`.
 */
export async function prefill(
  model: CausalLM,
  prompts: readonly (readonly number[])[],
  allPositions: boolean,
): Promise<{ logits: Float32Array[]; kv: LayerKv[]; width: number }> {
  const p = prefillOnDevice(model, prompts, allPositions)
  let values: Float32Array
  try {
    values = await readAndDispose(p.logits)
  } catch (err) {
    for (const l of p.kv) tf.dispose([l.k, l.v])
    throw err
  }
  return { logits: p.split(values), kv: p.kv, width: p.width }
}

/** {@link prefill} with the logits left on the device: `split` cuts their values (read by the caller, who disposes
 * the tensor) into each prompt's logits. */
export function prefillOnDevice(
  model: CausalLM,
  prompts: readonly (readonly number[])[],
  allPositions: boolean,
): { logits: tf.Tensor; kv: LayerKv[]; width: number; split: (values: Float32Array) => Float32Array[] } {
  if (prompts.length === 0) throw new LevanterError('BAD_SHAPE', 'prefill: no prompts; give at least one')
  prompts.forEach((p, r) => {
    if (p.length === 0) throw new LevanterError('BAD_SHAPE', `prefill: prompt ${r} is empty; give at least one token`)
    if (p.length > model.config.seqLen)
      throw new LevanterError(
        'BAD_SHAPE',
        `prefill: prompt ${r} has ${p.length} tokens, more than the ` +
          `model's seqLen ${model.config.seqLen}; shorten it`,
      )
  })
  const W = Math.max(...prompts.map((p) => p.length)),
    B = prompts.length,
    V = model.config.vocabSize
  const pads = prompts.map((p) => W - p.length)
  const ids = prompts.map((p, r) => [...new Array<number>(pads[r]!).fill(0), ...p])
  const positions = pads.map((pad) => Array.from({ length: W }, (_, t) => Math.max(0, t - pad)))
  // Query t of row r sees keys pad_r…t: causal, and never the padding on the left.
  const m = new Float32Array(B * W * W)
  pads.forEach((pad, r) => {
    for (let t = 0; t < W; t++)
      for (let s = 0; s < W; s++) if (s > t || (s < pad && t >= pad)) m[(r * W + t) * W + s] = -1e9
  })
  const bias = tf.tensor4d(m, [B, 1, W, W])
  let out: { logits: tf.Tensor; kv: LayerKv[] }
  try {
    out = run(model, ids, { positions, bias }, undefined, !allPositions)
  } finally {
    bias.dispose()
  }
  const split = (d: Float32Array) =>
    allPositions
      ? prompts.map((_, r) => d.slice((r * W + pads[r]!) * V, (r + 1) * W * V))
      : prompts.map((_, r) => d.slice(r * V, (r + 1) * V))
  return { ...out, width: W, split }
}
