/** @module AdamW with decoupled weight decay, global grad-norm clipping, and state as named tensors for checkpoints. */
import * as tf from '@tensorflow/tfjs'
import { z } from 'zod'
import type { CausalLM } from '../models/lm.js'

export const AdamWConfig = z.strictObject({
  beta1: z.number().min(0).lt(1).default(0.9),
  beta2: z.number().min(0).lt(1).default(0.95),
  eps: z.number().positive().default(1e-8),
  weightDecay: z.number().min(0).default(0.1).describe('decoupled: p ← p − lr·wd·p, on matrices and embeddings only'),
  maxGradNorm: z.number().positive().nullable().default(1).describe('clip the global L2 norm of the gradient; null disables'),
})
export type AdamWConfigInput = z.input<typeof AdamWConfig>
export type AdamWConfig = z.output<typeof AdamWConfig>

/** Global L2 norm of a set of gradients. */
export function globalNorm(grads: Iterable<tf.Tensor>): number {
  return tf.tidy(() => Math.sqrt(tf.addN([...grads].map((g) => tf.sum(tf.square(g)))).dataSync()[0]!))
}

/** First and second moments per parameter, plus the update count. */
export class AdamW {
  readonly m = new Map<string, tf.Variable>()
  readonly v = new Map<string, tf.Variable>()
  count = 0

  constructor(readonly config: AdamWConfig, readonly model: CausalLM) {
    for (const [name, p] of model.params) {
      this.m.set(name, tf.variable(tf.zerosLike(p), false))
      this.v.set(name, tf.variable(tf.zerosLike(p), false))
    }
  }

  /** Clip by global norm, then one AdamW update at `lr`. Returns the norm before clipping. */
  apply(grads: ReadonlyMap<string, tf.Tensor>, lr: number): number {
    const c = this.config
    const norm = globalNorm(grads.values())
    const scale = c.maxGradNorm !== null && norm > c.maxGradNorm ? c.maxGradNorm / (norm + 1e-6) : 1
    this.count++
    const bc1 = 1 - Math.pow(c.beta1, this.count), bc2 = 1 - Math.pow(c.beta2, this.count)
    const decay = new Set(this.model.specs.filter((s) => s.decay).map((s) => s.name))
    tf.tidy(() => {
      for (const [name, p] of this.model.params) {
        const g0 = grads.get(name)
        if (!g0) continue
        const g = scale === 1 ? g0 : tf.mul(g0, scale)
        const m = this.m.get(name)!, v = this.v.get(name)!
        const m1 = tf.add(tf.mul(m, c.beta1), tf.mul(g, 1 - c.beta1))
        const v1 = tf.add(tf.mul(v, c.beta2), tf.mul(tf.square(g), 1 - c.beta2))
        m.assign(m1)
        v.assign(v1)
        let step = tf.div(tf.mul(m1, 1 / bc1), tf.add(tf.sqrt(tf.mul(v1, 1 / bc2)), c.eps))
        if (decay.has(name) && c.weightDecay > 0) step = tf.add(step, tf.mul(p, c.weightDecay))
        p.assign(tf.sub(p, tf.mul(step, lr)))
      }
    })
    return norm
  }

  /** Moments by name (`m.<param>`, `v.<param>`), for checkpoints. */
  async state(): Promise<Map<string, Float32Array>> {
    const out = new Map<string, Float32Array>()
    for (const [n, t] of this.m) out.set(`m.${n}`, (await t.data()) as Float32Array)
    for (const [n, t] of this.v) out.set(`v.${n}`, (await t.data()) as Float32Array)
    return out
  }

  /** Restore moments saved by {@link state}, and the update count. */
  load(state: ReadonlyMap<string, Float32Array>, count: number): void {
    for (const [prefix, map] of [['m', this.m], ['v', this.v]] as const) {
      for (const [n, t] of map) {
        const d = state.get(`${prefix}.${n}`)
        if (d) t.assign(tf.tensor(d, t.shape))
      }
    }
    this.count = count
  }

  dispose(): void {
    for (const t of [...this.m.values(), ...this.v.values()]) t.dispose()
  }
}
