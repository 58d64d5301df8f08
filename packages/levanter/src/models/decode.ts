/**
 * @module Batched decoding, each row at its own position: what `generate` and a continuous-batching
 * server run. `prefill`: several prompts of different lengths, left-padded to one width, in one
 * pass; their keys/values come out right-aligned, the layout `BatchCache` keeps. `decodeStep`: B
 * sequences, each at its own position, advance by one token over the shared cache (weight
 * products over [B, D], attention over [B, H, 1, S] with each row's padding masked). Both are the
 * model's own forward pass (`CausalLM.forwardPlaced`), so a row's logits equal the full forward's
 * at its position (tested bit for bit on wasm, where products of at most 4 rows keep the blocked
 * GEMM's operation order).
 */
import * as tf from '@tensorflow/tfjs'
import { LevanterError } from '../errors.js'
import type { BatchCache, LayerKv } from './batch-cache.js'
import type { Placement } from './layers.js'
import type { CausalLM } from './lm.js'

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

/** The values of `t`, which is disposed. */
function readAndDispose(t: tf.Tensor): Float32Array {
  try {
    return t.dataSync() as Float32Array
  } finally {
    t.dispose()
  }
}

/**
 * Feeds `tokens[r]` at absolute position `lengths[r]` to row r of `cache`, extends the cache by one
 * column, and returns the next-token logits of every row, [B·V].
 */
export function decodeStep(model: CausalLM, cache: BatchCache, tokens: readonly number[]): Float32Array {
  return readAndDispose(decodeStepOnDevice(model, cache, tokens))
}

/** {@link decodeStep} with the logits left on the device, [B, 1, V] (the caller reads and disposes them: on webgpu
 * with `await data()`). */
export function decodeStepOnDevice(model: CausalLM, cache: BatchCache, tokens: readonly number[]): tf.Tensor {
  if (tokens.length !== cache.rows)
    throw new LevanterError(
      'BAD_SHAPE',
      `decodeStep: ${tokens.length} tokens for ${cache.rows} cache rows; give one token per row`,
    )
  const full = cache.lengths.findIndex((l) => l >= model.config.seqLen)
  if (full >= 0)
    throw new LevanterError(
      'BAD_SHAPE',
      `decodeStep: row ${full} already holds ${cache.lengths[full]} ` +
        `positions, the model's seqLen ${model.config.seqLen}; end that ` +
        `sequence first`,
    )
  const at = { positions: cache.lengths.map((l) => [l]), bias: cache.stepBias() }
  const { logits, kv } = run(
    model,
    tokens.map((t) => [t]),
    at,
    cache.layers.length ? cache.layers : undefined,
    false,
  )
  at.bias.dispose()
  cache.advance(kv)
  return logits
}

/**
 * Runs several prompts in one pass. Returns each prompt's logits ([T_r·V] over its own positions
 * when `allPositions`, else [V] for its last position) and the keys/values of all rows, [B, H, W, K]
 * right-aligned (W the longest prompt), ready for `BatchCache.add`.
 */
export function prefill(
  model: CausalLM,
  prompts: readonly (readonly number[])[],
  allPositions: boolean,
): { logits: Float32Array[]; kv: LayerKv[]; width: number } {
  const p = prefillOnDevice(model, prompts, allPositions)
  return { logits: p.split(readAndDispose(p.logits)), kv: p.kv, width: p.width }
}

/** {@link prefill} with the logits left on the device: `split` cuts their values (read by the caller, who disposes
 * the tensor) into each prompt's logits. */
export function prefillOnDevice(
  model: CausalLM,
  prompts: readonly (readonly number[])[],
  allPositions: boolean,
): { logits: tf.Tensor; kv: LayerKv[]; width: number; split: (values: Float32Array) => Float32Array[] } {
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
  const { logits, kv } = run(model, ids, { positions, bias }, undefined, !allPositions)
  bias.dispose()
  const split = (d: Float32Array) =>
    allPositions
      ? prompts.map((_, r) => d.slice((r * W + pads[r]!) * V, (r + 1) * W * V))
      : prompts.map((_, r) => d.slice(r * V, (r + 1) * V))
  return { logits, kv, width: W, split }
}
