/**
 * @module A user's architecture in a module of its own, as an experiment file would hold it: a token
 * embedding, residual gated MLPs (split over the model axis by columns then rows) and an untied
 * head, registered on import with its module URL, so that replica processes can load it.
 */
import * as tf from '@tensorflow/tfjs'
import { z } from 'zod'
import { CausalLM } from '../models/causal-lm.js'
import { modelConfigFields } from '../models/config.js'
import { lastPosition, linear } from '../models/layers.js'
import type { ForwardArgs, ForwardResult } from '../models/layers.js'
import { mat, ones } from '../models/param-spec.js'
import { defineArchitecture, registerArchitecture, transformerFlops } from '../models/registry.js'
import { residual } from '../models/stages.js'

const UserConfig = z.strictObject({
  type: z.literal('user-gated-mlp'),
  ...modelConfigFields,
  hidden: z.number().int().positive().default(8).describe('MLP width'),
})
type UserConfig = z.output<typeof UserConfig>

const specs = (c: UserConfig) => [
  mat('tok.weight', [c.vocabSize, c.dModel], c.initStd),
  ...Array.from({ length: c.nLayers }, (_, i) => [
    ones(`blocks.${i}.norm`, c.dModel),
    mat(`blocks.${i}.gate.weight`, [c.dModel, c.hidden], c.initStd, 'column'),
    mat(`blocks.${i}.up.weight`, [c.dModel, c.hidden], c.initStd, 'column'),
    mat(`blocks.${i}.down.weight`, [c.hidden, c.dModel], c.initStd, 'row'),
  ]).flat(),
  mat('out.weight', [c.dModel, c.vocabSize], c.initStd),
]

const gated = (x: tf.Tensor, [n, g, u, d]: tf.Tensor[]) => {
  const h = tf.mul(x, n!)
  return linear(tf.mul(tf.sigmoid(linear(h, g!)), linear(h, u!)), d!)
}
const blockNames = (i: number) => ['norm', 'gate.weight', 'up.weight', 'down.weight'].map((n) => `blocks.${i}.${n}`)
const embed = (c: UserConfig, ids: tf.Tensor, w: tf.Tensor) => {
  const [B, T] = ids.shape as [number, number]
  return tf.reshape(tf.gather(w, tf.reshape(ids, [-1])), [B, T, c.dModel])
}

class UserLM extends CausalLM<UserConfig> {
  constructor(c: UserConfig, seed: number) {
    super(c, specs(c), seed)
  }
  protected run(...[p, ids, _at, _past, lastOnly = false]: ForwardArgs): ForwardResult {
    let x = embed(this.config, ids, p('tok.weight'))
    for (let i = 0; i < this.config.nLayers; i++) x = tf.add(x, gated(x, blockNames(i).map(p)))
    return { logits: linear(lastOnly ? lastPosition(x) : x, p('out.weight')), kv: [] }
  }
}

export const userArchitecture = defineArchitecture({
  type: 'user-gated-mlp',
  config: UserConfig,
  specs,
  create: (c: UserConfig, seed: number) => new UserLM(c, seed),
  flopsPerToken: (c, seqLen, numParams) => transformerFlops(c, seqLen, numParams - c.vocabSize * c.dModel),
  modelAxis: (c) => [{ label: 'hidden', value: c.hidden, what: 'the MLP columns are split over it' }],
  stages: (c, _model, lead) => ({
    embed: { names: ['tok.weight'], split: false, fn: (ids, [w]) => embed(c, ids, w!) },
    blocks: Array.from({ length: c.nLayers }, (_, i) => ({
      names: blockNames(i),
      split: true,
      fn: (x: tf.Tensor, w: tf.Tensor[]) => residual(lead, x, gated(x, w)),
    })),
    head: { names: ['out.weight'], split: false, fn: (x, [w]) => linear(x, w!) },
  }),
  module: import.meta.url,
})
registerArchitecture(userArchitecture)
