/**
 * The baseline: the reference GPT-2 written plainly with stock tfjs ops and gradients, as a user
 * would: matMul with transpose flags for attention and the tied head, a one-hot matMul for the
 * embedding (the wasm backend cannot differentiate tf.gather), tf.train.adam with betas 0.9/0.95.
 */
import * as tf from '@tensorflow/tfjs'
import type { Gpt2LM } from '../src/models/lm.js'

export function stockTrainStep(model: Gpt2LM, opt: tf.Optimizer): (ids: tf.Tensor2D, targets: tf.Tensor2D) => number {
  const c = model.config
  const p = (n: string) => model.param(n)
  const vars = [...model.params.values()]
  const ln = (x: tf.Tensor, g: tf.Tensor, b: tf.Tensor) => {
    const { mean, variance } = tf.moments(x, -1, true)
    return x.sub(mean).div(variance.add(c.layerNormEps).sqrt()).mul(g).add(b)
  }
  const gelu = (x: tf.Tensor) =>
    x.mul(0.5).mul(tf.tanh(x.add(x.pow(3).mul(0.044715)).mul(Math.sqrt(2 / Math.PI))).add(1))
  return (ids, targets) => {
    const [B, T] = ids.shape
    const D = c.dModel,
      H = c.nHeads,
      K = D / H
    const cost = opt.minimize(
      () => {
        const onehot = tf.oneHot(ids.reshape([-1]), c.vocabSize).toFloat()
        let x = onehot
          .matMul(p('transformer.wte.weight'))
          .reshape([B, T, D])
          .add(p('transformer.wpe.weight').slice([0, 0], [T, D]))
        const mask = tf.linalg
          .bandPart(tf.ones([T, T]), -1, 0)
          .sub(1)
          .mul(1e9)
        for (let i = 0; i < c.nLayers; i++) {
          const w = (n: string) => p(`transformer.h.${i}.${n}`)
          const a = ln(x, w('ln_1.weight'), w('ln_1.bias')).reshape([B * T, D])
          const qkv = a
            .matMul(w('attn.c_attn.weight'))
            .add(w('attn.c_attn.bias'))
            .reshape([B, T, 3, H, K])
            .transpose([2, 0, 3, 1, 4])
          const [q, k, v] = tf.unstack(qkv) as [tf.Tensor4D, tf.Tensor4D, tf.Tensor4D]
          const att = tf.softmax(tf.matMul(q, k, false, true).div(Math.sqrt(K)).add(mask))
          const y = tf
            .matMul(att, v)
            .transpose([0, 2, 1, 3])
            .reshape([B * T, D])
          x = x.add(y.matMul(w('attn.c_proj.weight')).add(w('attn.c_proj.bias')).reshape([B, T, D]))
          const m = ln(x, w('ln_2.weight'), w('ln_2.bias')).reshape([B * T, D])
          const h = gelu(m.matMul(w('mlp.c_fc.weight')).add(w('mlp.c_fc.bias')))
          x = x.add(h.matMul(w('mlp.c_proj.weight')).add(w('mlp.c_proj.bias')).reshape([B, T, D]))
        }
        const f = ln(x, p('transformer.ln_f.weight'), p('transformer.ln_f.bias')).reshape([B * T, D])
        const logits = tf.matMul(f, p('transformer.wte.weight'), false, true)
        return tf.losses.softmaxCrossEntropy(tf.oneHot(targets.reshape([-1]), c.vocabSize), logits) as tf.Scalar
      },
      true,
      vars,
    )
    const loss = cost!.dataSync()[0]!
    cost!.dispose()
    return loss
  }
}
