/**
 * @module The GPT-2 architecture: learned positions, pre-LayerNorm blocks, GELU (tanh), tied
 * embeddings. Parameter names and layouts are GPT2LMHeadModel's (Conv1D weights are [in, out], as
 * Hugging Face stores them). Over the model axis attention splits by heads (the packed q/k/v
 * projection by columns, q, k and v each its own block; the output projection by rows) and the MLP
 * by columns then rows.
 */
import * as tf from '@tensorflow/tfjs'
import { fusedCausalAttention, fusedDecodeAttention } from '../kernels/attention.js'
import { LevanterError } from '../errors.js'
import { bf16DecodeWeights, nativeDecodeStep } from '../kernels/native-gemv-decode.js'
import { CausalLM } from './causal-lm.js'
import { Gpt2Config } from './config.js'
import type { Gpt2ConfigInput } from './config.js'
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
import { defineArchitecture, transformerFlops } from './registry.js'
import { residual } from './stages.js'
import type { Stage, Stages } from './stages.js'

const TYPE = 'gpt2'

/** GPT-2's parameters, in order, with their sharding rules. */
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
      mat(`${h}.attn.c_attn.weight`, [D, 3 * D], c.initStd, { column: 3 }),
      zeros(`${h}.attn.c_attn.bias`, 3 * D, { column: 3 }),
      mat(`${h}.attn.c_proj.weight`, [D, D], proj, 'row'),
      zeros(`${h}.attn.c_proj.bias`, D),
      ones(`${h}.ln_2.weight`, D),
      zeros(`${h}.ln_2.bias`, D),
      mat(`${h}.mlp.c_fc.weight`, [D, F], c.initStd, 'column'),
      zeros(`${h}.mlp.c_fc.bias`, F, 'column'),
      mat(`${h}.mlp.c_proj.weight`, [F, D], proj, 'row'),
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

/** The stages of a GPT-2 for a member of `model` (`lead`: its model coordinate is 0). */
export function gpt2Stages(c: Gpt2Config, model: number, lead: boolean): Stages {
  const heads = c.nHeads / model
  const blocks: Stage[] = []
  for (let i = 0; i < c.nLayers; i++) {
    const h = `transformer.h.${i}`
    blocks.push(
      {
        names: [
          'ln_1.weight',
          'ln_1.bias',
          'attn.c_attn.weight',
          'attn.c_attn.bias',
          'attn.c_proj.weight',
          'attn.c_proj.bias',
        ].map((n) => `${h}.${n}`),
        split: true,
        fn: (x, [g, b, wa, ba, wp, bp]) => {
          const a = layerNorm(x, g!, b!, c.layerNormEps)
          const [q, k, v] = tf.split(linear(a, wa!, ba!), 3, 2).map((t) => splitHeads(t, heads)) as [
            tf.Tensor,
            tf.Tensor,
            tf.Tensor,
          ]
          return residual(lead, x, linear(mergeHeads(attention(q, k, v, { offset: 0 })), wp!), bp!)
        },
      },
      {
        names: [
          'ln_2.weight',
          'ln_2.bias',
          'mlp.c_fc.weight',
          'mlp.c_fc.bias',
          'mlp.c_proj.weight',
          'mlp.c_proj.bias',
        ].map((n) => `${h}.${n}`),
        split: true,
        fn: (x, [g, b, wf, bf, wp, bp]) => {
          const m = layerNorm(x, g!, b!, c.layerNormEps)
          return residual(lead, x, linear(geluTanh(linear(m, wf!, bf!)), wp!), bp!)
        },
      },
    )
  }
  return {
    embed: {
      names: ['transformer.wte.weight', 'transformer.wpe.weight'],
      split: false,
      fn: (ids, [wte, wpe]) => {
        const [B, T] = ids.shape as [number, number]
        const tok = tf.reshape(tf.gather(wte!, tf.reshape(ids, [-1])), [B, T, c.dModel])
        return tf.add(tok, tf.slice(wpe!, [0, 0], [T, c.dModel]))
      },
    },
    blocks,
    head: {
      names: ['transformer.ln_f.weight', 'transformer.ln_f.bias', 'transformer.wte.weight'],
      split: false,
      fn: (x, [g, b, wte]) => tiedHead(layerNorm(x, g!, b!, c.layerNormEps), wte!),
    },
  }
}

/** GPT-2 language model. @example new Gpt2LM({ vocabSize: 512, seqLen: 128, dModel: 256, nLayers: 4, nHeads: 4 }) */
export class Gpt2LM extends CausalLM<Gpt2Config> {
  constructor(config: Omit<Gpt2ConfigInput, 'type'> & { type?: 'gpt2' }, seed = 0) {
    const c = Gpt2Config.parse({ ...config, type: TYPE })
    super(c, gpt2Specs(c), seed)
  }
  protected run(...args: ForwardArgs): ForwardResult {
    return gpt2Forward(this.config, ...args)
  }
}

function fromHfConfig(j: Record<string, unknown>, file: string): Gpt2ConfigInput {
  const n = (k: string) => {
    if (typeof j[k] !== 'number')
      throw new LevanterError('BAD_CHECKPOINT', `${file}: field "${k}" is missing or not a number`)
    return j[k] as number
  }
  const inner = typeof j.n_inner === 'number' ? j.n_inner : 4 * n('n_embd')
  return {
    type: TYPE,
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

/** GPT-2 as an architecture value (registered by models/builtin.ts). */
export const gpt2Architecture = defineArchitecture({
  type: TYPE,
  config: Gpt2Config,
  specs: gpt2Specs,
  create: (c: Gpt2Config, seed: number) => new Gpt2LM(c, seed),
  // the position table is a lookup, not a matmul
  flopsPerToken: (c, seqLen, numParams) => transformerFlops(c, seqLen, numParams - c.seqLen * c.dModel),
  stages: gpt2Stages,
  // a decode step as one native call (the same logits bit for bit), over float32 or bf16 copies of the matrices
  decode: {
    step: nativeDecodeStep,
    prepare: (model: Gpt2LM, weights: 'fp32' | 'bf16') => {
      if (weights === 'bf16') bf16DecodeWeights(model)
    },
  },
  modelAxis: (c) => [{ label: 'the MLP width', value: c.mlpRatio * c.dModel, what: 'its columns are split over it' }],
  hf: {
    modelType: TYPE,
    className: 'GPT2LMHeadModel',
    fields: new Map([
      ['vocabSize', 'vocab_size'],
      ['seqLen', 'n_positions'],
      ['dModel', 'n_embd'],
      ['nLayers', 'n_layer'],
      ['nHeads', 'n_head'],
      ['mlpRatio', 'n_inner'],
      ['layerNormEps', 'layer_norm_epsilon'],
      ['initStd', 'initializer_range'],
    ]),
    toConfig: (c) => ({
      architectures: ['GPT2LMHeadModel'],
      model_type: TYPE,
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
    }),
    fromConfig: fromHfConfig,
    // files from the hub may lack the "transformer." prefix
    aliases: (name) => [name.replace(/^transformer\./, '')],
  },
})
