/**
 * @module Forward passes of a continuous batch, each over every row at once. `decodeStep`: B
 * sequences, each at its own position, advance by one token over the shared `BatchCache` (weight
 * products over [B, D], attention over [B, H, 1, S] with each row's padding masked). `prefill`:
 * several prompts of different lengths, left-padded to one width, in one pass; their keys/values
 * come out right-aligned, the layout the batch cache keeps.
 */
import * as tf from '@tensorflow/tfjs'
import type { CausalLM, LayerKv } from '@marin/levanter'
import type { BatchCache } from './batch-cache.js'
import { applyRope, geluTanh, layerNorm, linear, maskedAttention, mergeHeads, ropeRows, rmsNorm, splitHeads } from './internal/layers.js'

/** ids [B, T] at absolute positions [B][T], attending to `past` ([B, H, S, K] per layer, or none) plus themselves under `bias` [B, 1, T, S+T]. */
function forwardRows(model: CausalLM, ids: readonly (readonly number[])[], positions: readonly (readonly number[])[], bias: tf.Tensor, past: readonly LayerKv[] | undefined, lastOnly: boolean): { logits: tf.Tensor; kv: LayerKv[] } {
  const c = model.config, B = ids.length, T = ids[0]!.length, H = c.nHeads, K = c.dModel / H
  const p = (n: string): tf.Tensor => model.param(n)
  const idT = tf.tensor1d(ids.flat(), 'int32')
  const kv: LayerKv[] = []
  const attend = (i: number, q: tf.Tensor, k: tf.Tensor, v: tf.Tensor) => {
    const prev = past?.[i]
    const kAll = prev ? tf.concat([prev.k, k], 2) : k, vAll = prev ? tf.concat([prev.v, v], 2) : v
    kv.push({ k: kAll, v: vAll })
    return mergeHeads(maskedAttention(q, kAll, vAll, bias))
  }
  // Only the last position's logits are needed to sample; the head is the largest product.
  const last = (x: tf.Tensor) => (lastOnly && T > 1 ? tf.slice(x, [0, T - 1, 0], [B, 1, c.dModel]) : x)
  let x: tf.Tensor
  if (c.type === 'gpt2') {
    x = tf.reshape(tf.add(tf.gather(p('transformer.wte.weight'), idT), tf.gather(p('transformer.wpe.weight'), tf.tensor1d(positions.flat(), 'int32'))), [B, T, c.dModel])
    for (let i = 0; i < c.nLayers; i++) {
      const w = (n: string) => p(`transformer.h.${i}.${n}`)
      const a = layerNorm(x, w('ln_1.weight'), w('ln_1.bias'), c.layerNormEps)
      const [q, k, v] = tf.split(linear(a, w('attn.c_attn.weight'), w('attn.c_attn.bias')), 3, 2).map((t) => splitHeads(t, H)) as [tf.Tensor, tf.Tensor, tf.Tensor]
      x = tf.add(x, linear(attend(i, q, k, v), w('attn.c_proj.weight'), w('attn.c_proj.bias')))
      const m = layerNorm(x, w('ln_2.weight'), w('ln_2.bias'), c.layerNormEps)
      x = tf.add(x, linear(geluTanh(linear(m, w('mlp.c_fc.weight'), w('mlp.c_fc.bias'))), w('mlp.c_proj.weight'), w('mlp.c_proj.bias')))
    }
    x = layerNorm(last(x), p('transformer.ln_f.weight'), p('transformer.ln_f.bias'), c.layerNormEps)
    return { logits: linear(x, tf.transpose(p('transformer.wte.weight'))), kv }
  }
  const { cos, sin } = ropeRows(positions, K, c.ropeTheta)
  x = tf.reshape(tf.gather(p('model.embed_tokens.weight'), idT), [B, T, c.dModel])
  for (let i = 0; i < c.nLayers; i++) {
    const w = (n: string) => p(`model.layers.${i}.${n}.weight`)
    const a = rmsNorm(x, w('input_layernorm'), c.rmsNormEps)
    const q = applyRope(splitHeads(linear(a, w('self_attn.q_proj')), H), cos, sin)
    const k = applyRope(splitHeads(linear(a, w('self_attn.k_proj')), H), cos, sin)
    const v = splitHeads(linear(a, w('self_attn.v_proj')), H)
    x = tf.add(x, linear(attend(i, q, k, v), w('self_attn.o_proj')))
    const m = rmsNorm(x, w('post_attention_layernorm'), c.rmsNormEps)
    const gate = linear(m, w('mlp.gate_proj'))
    x = tf.add(x, linear(tf.mul(tf.mul(gate, tf.sigmoid(gate)), linear(m, w('mlp.up_proj'))), w('mlp.down_proj')))
  }
  x = rmsNorm(last(x), p('model.norm.weight'), c.rmsNormEps)
  return { logits: linear(x, p('lm_head.weight')), kv }
}

function run(model: CausalLM, f: () => { logits: tf.Tensor; kv: LayerKv[] }): { logits: Float32Array; kv: LayerKv[] } {
  const { logits, kv } = tf.tidy(f)
  const data = logits.dataSync() as Float32Array
  logits.dispose()
  return { logits: data, kv }
}

/**
 * Feeds `tokens[r]` at absolute position `lengths[r]` to row r of `cache`, extends the cache by one
 * column, and returns the next-token logits of every row, [B·V].
 */
export function decodeStep(model: CausalLM, cache: BatchCache, tokens: readonly number[]): Float32Array {
  const { logits, kv } = run(model, () => forwardRows(model, tokens.map((t) => [t]), cache.lengths.map((l) => [l]), cache.stepBias(), cache.layers, false))
  cache.advance(kv)
  return logits
}

/**
 * Runs several prompts in one pass. Returns each prompt's logits ([T_r·V] over its own positions
 * when `allPositions`, else [V] for its last position) and the keys/values of all rows, [B, H, W, K]
 * right-aligned (W the longest prompt), ready for `BatchCache.add`.
 */
export function prefill(model: CausalLM, prompts: readonly (readonly number[])[], allPositions: boolean): { logits: Float32Array[]; kv: LayerKv[]; width: number } {
  const W = Math.max(...prompts.map((p) => p.length)), B = prompts.length, V = model.config.vocabSize
  const pads = prompts.map((p) => W - p.length)
  const ids = prompts.map((p, r) => [...new Array<number>(pads[r]!).fill(0), ...p])
  const positions = pads.map((pad) => Array.from({ length: W }, (_, t) => Math.max(0, t - pad)))
  // Query t of row r sees keys pad_r…t: causal, and never the padding on the left.
  const m = new Float32Array(B * W * W)
  pads.forEach((pad, r) => {
    for (let t = 0; t < W; t++) for (let s = 0; s < W; s++) if (s > t || (s < pad && t >= pad)) m[(r * W + t) * W + s] = -1e9
  })
  const { logits, kv } = run(model, () => forwardRows(model, ids, positions, tf.tensor4d(m, [B, 1, W, W]), undefined, !allPositions))
  const per = allPositions
    ? prompts.map((p, r) => logits.slice((r * W + pads[r]!) * V, (r + 1) * W * V))
    : prompts.map((_, r) => logits.slice(r * V, (r + 1) * V))
  return { logits: per, kv, width: W }
}
