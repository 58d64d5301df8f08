/**
 * @module One decode step for a continuous batch: B sequences, each at its own position with its
 * own per-layer keys/values, advance by one token in a single forward pass. The weight products
 * (QKV, projections, MLP, head) run once over [B, D]; only attention is per row.
 */
import * as tf from '@tensorflow/tfjs'
import type { CausalLM, LayerKv } from '@marin/levanter'
import { applyRope, geluTanh, layerNorm, linear, mergeHeads, raggedAttention, ropeRows, rmsNorm, splitHeads } from './internal/layers.js'

/** A sequence entering a decode step: its cached keys/values, the position and id of its next input token. */
export type DecodeRow = { readonly kv: readonly LayerKv[]; readonly position: number; readonly token: number }

/** Logits [B·V] of the next token of each row, and each row's keys/values extended by one position (the caller owns them). */
export type DecodeOutput = { readonly logits: Float32Array; readonly kv: LayerKv[][] }

/** Runs one step for every row in one forward pass. */
export function decodeStep(model: CausalLM, rows: readonly DecodeRow[]): DecodeOutput {
  const c = model.config, B = rows.length, H = c.nHeads, K = c.dModel / H
  const p = (n: string): tf.Tensor => model.param(n)
  const flat = tf.tidy(() => {
    const ids = tf.tensor1d(rows.map((r) => r.token), 'int32')
    const positions = rows.map((r) => r.position)
    const out: tf.Tensor[] = []
    const attend = (i: number, q: tf.Tensor, k: tf.Tensor, v: tf.Tensor) => {
      const ks: tf.Tensor[] = [], vs: tf.Tensor[] = []
      rows.forEach((r, b) => {
        ks.push(tf.concat([r.kv[i]!.k, tf.slice(k, [b, 0, 0, 0], [1, H, 1, K])], 2))
        vs.push(tf.concat([r.kv[i]!.v, tf.slice(v, [b, 0, 0, 0], [1, H, 1, K])], 2))
      })
      out.push(...ks.flatMap((kk, b) => [kk, vs[b]!]))
      return mergeHeads(raggedAttention(q, ks, vs))
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
  // kvFlat is ordered layer-major, then row: [L0 r0 k, L0 r0 v, L0 r1 k, ...].
  const kv: LayerKv[][] = rows.map(() => [])
  for (let i = 0; i < c.nLayers; i++) {
    for (let b = 0; b < B; b++) kv[b]!.push({ k: kvFlat[(i * B + b) * 2]!, v: kvFlat[(i * B + b) * 2 + 1]! })
  }
  return { logits, kv }
}
