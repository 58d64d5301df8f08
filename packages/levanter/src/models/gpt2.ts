/**
 * @module GPT-2: learned positions, pre-LayerNorm blocks, GELU (tanh), tied embeddings.
 * Parameter names and layouts are GPT2LMHeadModel's (Conv1D weights are [in, out]).
 */
import * as tf from '@tensorflow/tfjs'
import { fusedCausalAttention, fusedDecodeAttention } from '../kernels/attention.js'
import type { Gpt2Config } from './config.js'
import type { LayerKv } from './batch-cache.js'
import {
  attention,
  decodeStepOver,
  geluTanh,
  lastPosition,
  layerNorm,
  linear,
  mergeHeads,
  splitHeads,
  tiedHead,
} from './layers.js'
import type { ForwardArgs, ForwardResult } from './layers.js'
import { mat, ones, zeros } from './param-spec.js'
import type { ParamSpec } from './param-spec.js'

export function gpt2Specs(c: Gpt2Config): ParamSpec[] {
  const D = c.dModel,
    F = c.mlpRatio * D,
    proj = c.initStd / Math.sqrt(2 * c.nLayers)
  const specs: ParamSpec[] = [
    mat('transformer.wte.weight', [c.vocabSize, D], c.initStd),
    mat('transformer.wpe.weight', [c.seqLen, D], c.initStd / 2),
  ]
  for (let i = 0; i < c.nLayers; i++) {
    const h = `transformer.h.${i}`
    specs.push(
      ones(`${h}.ln_1.weight`, D),
      zeros(`${h}.ln_1.bias`, D),
      mat(`${h}.attn.c_attn.weight`, [D, 3 * D], c.initStd),
      zeros(`${h}.attn.c_attn.bias`, 3 * D),
      mat(`${h}.attn.c_proj.weight`, [D, D], proj),
      zeros(`${h}.attn.c_proj.bias`, D),
      ones(`${h}.ln_2.weight`, D),
      zeros(`${h}.ln_2.bias`, D),
      mat(`${h}.mlp.c_fc.weight`, [D, F], c.initStd),
      zeros(`${h}.mlp.c_fc.bias`, F),
      mat(`${h}.mlp.c_proj.weight`, [F, D], proj),
      zeros(`${h}.mlp.c_proj.bias`, D),
    )
  }
  specs.push(ones('transformer.ln_f.weight', D), zeros('transformer.ln_f.bias', D))
  return specs
}

/** ids [B, T] placed by `at` → logits and each layer's keys/values (see {@link ForwardArgs}). */
export function gpt2Forward(
  c: Gpt2Config,
  ...[p, ids, at, past, lastOnly = false, keepKv = true]: ForwardArgs
): ForwardResult {
  const [B, T] = ids.shape as [number, number]
  const wpe = p('transformer.wpe.weight')
  const pos =
    'offset' in at
      ? tf.slice(wpe, [at.offset, 0], [T, c.dModel]) // [T, D]
      : tf.reshape(tf.gather(wpe, tf.tensor1d(at.positions.flat(), 'int32')), [B, T, c.dModel])
  // [B, T, D]
  let x = tf.add(tf.reshape(tf.gather(p('transformer.wte.weight'), tf.reshape(ids, [-1])), [B, T, c.dModel]), pos)
  const kv: LayerKv[] = []
  for (let i = 0; i < c.nLayers; i++) {
    const h = `transformer.h.${i}`,
      w = (n: string) => p(`${h}.${n}`)
    const a = layerNorm(x, w('ln_1.weight'), w('ln_1.bias'), c.layerNormEps)
    const qkv = linear(a, w('attn.c_attn.weight'), w('attn.c_attn.bias')) // [B, T, 3D]
    // whole sequences whose keys/values nobody keeps: one fused kernel where the native ones run
    let attended =
      !keepKv && !past && 'offset' in at && at.offset === 0 ? fusedCausalAttention(qkv, c.nHeads) : undefined
    const prev = past?.[i]
    // a decode step over a cache: one kernel reads q, k and v in place and grows the cache, where the native ones run
    const cached = prev && decodeStepOver(at, T) // (a pass with a past never ran the fused causal kernel above)
    const step =
      cached && prev
        ? fusedDecodeAttention(qkv, qkv, qkv, prev, cached, {
            nHeads: c.nHeads,
            nKvHeads: c.nHeads,
            kvOffset: [c.dModel, 2 * c.dModel],
          })
        : undefined
    if (step) {
      kv.push({ k: step.k, v: step.v })
      attended = step.out
    } else if (!attended) {
      const [q, k, v] = tf.split(qkv, 3, 2).map((t) => splitHeads(t, c.nHeads)) as [tf.Tensor, tf.Tensor, tf.Tensor]
      const kAll = prev ? tf.concat([prev.k, k], 2) : k,
        vAll = prev ? tf.concat([prev.v, v], 2) : v // [B, H, S, K]
      kv.push({ k: kAll, v: vAll })
      attended = mergeHeads(attention(q, kAll, vAll, at))
    }
    x = tf.add(x, linear(attended, w('attn.c_proj.weight'), w('attn.c_proj.bias')))
    const m = layerNorm(x, w('ln_2.weight'), w('ln_2.bias'), c.layerNormEps)
    x = tf.add(
      x,
      linear(
        geluTanh(linear(m, w('mlp.c_fc.weight'), w('mlp.c_fc.bias'))),
        w('mlp.c_proj.weight'),
        w('mlp.c_proj.bias'),
      ),
    )
  }
  x = layerNorm(
    lastOnly ? lastPosition(x) : x,
    p('transformer.ln_f.weight'),
    p('transformer.ln_f.bias'),
    c.layerNormEps,
  )
  return { logits: tiedHead(x, p('transformer.wte.weight')), kv } // [B, T, V]
}
