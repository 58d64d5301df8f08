/**
 * @module One decode step for a continuous batch: B sequences, each at its own position, advance
 * by one token in a single forward pass over the shared `BatchCache`: the weight products (QKV,
 * projections, MLP, head) run once over [B, D], attention once over [B, H, 1, S] with each row's
 * padding masked.
 */
import * as tf from '@tensorflow/tfjs'
import type { CausalLM, LayerKv } from '@marin/levanter'
import type { BatchCache } from './batch-cache.js'
import { applyRope, geluTanh, layerNorm, linear, maskedAttention, mergeHeads, ropeRows, rmsNorm, splitHeads } from './internal/layers.js'

/**
 * Feeds `tokens[r]` at absolute position `lengths[r]` to row r of `cache`, extends the cache by one
 * column, and returns the next-token logits of every row, [B·V].
 */
export function decodeStep(model: CausalLM, cache: BatchCache, tokens: readonly number[]): Float32Array {
  const c = model.config, B = cache.rows, H = c.nHeads, K = c.dModel / H
  const p = (n: string): tf.Tensor => model.param(n)
  const flat = tf.tidy(() => {
    const ids = tf.tensor1d([...tokens], 'int32')
    const positions = cache.lengths
    const bias = cache.stepBias()
    const out: tf.Tensor[] = []
    const attend = (i: number, q: tf.Tensor, k: tf.Tensor, v: tf.Tensor) => {
      const kAll = tf.concat([cache.layers[i]!.k, k], 2), vAll = tf.concat([cache.layers[i]!.v, v], 2)
      out.push(kAll, vAll)
      return mergeHeads(maskedAttention(q, kAll, vAll, bias))
    }
    let x: tf.Tensor
    if (c.type === 'gpt2') {
      x = tf.reshape(tf.add(tf.gather(p('transformer.wte.weight'), ids), tf.gather(p('transformer.wpe.weight'), tf.tensor1d(positions, 'int32'))), [B, 1, c.dModel])
      for (let i = 0; i < c.nLayers; i++) {
        const w = (n: string) => p(`transformer.h.${i}.${n}`)
        const a = layerNorm(x, w('ln_1.weight'), w('ln_1.bias'), c.layerNormEps)
        const [q, k, v] = tf.split(linear(a, w('attn.c_attn.weight'), w('attn.c_attn.bias')), 3, 2).map((t) => splitHeads(t, H)) as [tf.Tensor, tf.Tensor, tf.Tensor]
        x = tf.add(x, linear(attend(i, q, k, v), w('attn.c_proj.weight'), w('attn.c_proj.bias')))
        const m = layerNorm(x, w('ln_2.weight'), w('ln_2.bias'), c.layerNormEps)
        x = tf.add(x, linear(geluTanh(linear(m, w('mlp.c_fc.weight'), w('mlp.c_fc.bias'))), w('mlp.c_proj.weight'), w('mlp.c_proj.bias')))
      }
      x = layerNorm(x, p('transformer.ln_f.weight'), p('transformer.ln_f.bias'), c.layerNormEps)
      out.unshift(linear(x, tf.transpose(p('transformer.wte.weight'))))
    } else {
      const { cos, sin } = ropeRows(positions, K, c.ropeTheta)
      x = tf.reshape(tf.gather(p('model.embed_tokens.weight'), ids), [B, 1, c.dModel])
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
      x = rmsNorm(x, p('model.norm.weight'), c.rmsNormEps)
      out.unshift(linear(x, p('lm_head.weight')))
    }
    return out
  })
  const [logitsT, ...kvFlat] = flat
  const logits = logitsT!.dataSync() as Float32Array
  logitsT!.dispose()
  const next: LayerKv[] = []
  for (let i = 0; i < c.nLayers; i++) next.push({ k: kvFlat[2 * i]!, v: kvFlat[2 * i + 1]! })
  cache.advance(next)
  return logits
}
