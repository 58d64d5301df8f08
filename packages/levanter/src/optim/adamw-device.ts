/**
 * @module AdamW on the device: moments are variables beside the parameters, and clipping and the
 * update run on the device, so a step reads nothing back to the host. On webgpu that is levanter's
 * WGSL kernels (webgpu/kernels/adamw.ts: one dispatch per gradient for the norm, one more, and one
 * per parameter for the update); elsewhere tensor ops. Both are the AdamW op of adamw-op.ts, with
 * its constants: the numbers of {@link AdamW} (in float32 throughout).
 */
import * as tf from '@tensorflow/tfjs'
import { fusedAdamW, fusedGlobalNorm, hasFusedAdamW } from '../webgpu/kernels/adamw.js'
import { loadMoments } from './adamw.js'
import { adamwStep } from './adamw-op.js'
import type { AdamWStep } from './adamw-op.js'
import type { AdamWConfig, NamedParams } from './adamw.js'

export class DeviceAdamW {
  /** First moments by parameter name. */
  readonly m = new Map<string, tf.Variable>()
  /** Second moments by parameter name. */
  readonly v = new Map<string, tf.Variable>()
  count = 0
  readonly #decay: ReadonlySet<string>

  readonly #params: ReadonlyMap<string, tf.Variable>

  constructor(
    readonly config: AdamWConfig,
    target: NamedParams,
  ) {
    this.#params = target.params
    // each moment owns its buffer (the fused update writes it in place)
    const zeros = (shape: number[]) => tf.tidy(() => tf.variable(tf.zeros(shape), false))
    for (const [name, p] of target.params) {
      this.m.set(name, zeros(p.shape))
      this.v.set(name, zeros(p.shape))
    }
    this.#decay = new Set(target.decay)
  }

  /** Clip by global norm, then one AdamW update at `lr`. Returns the norm before clipping, on the device (the caller
   * disposes it). */
  apply(grads: ReadonlyMap<string, tf.Tensor>, lr: number): tf.Scalar {
    const s = adamwStep(this.config, ++this.count, lr)
    const present = [...this.#params.keys()].filter((n) => grads.has(n))
    if (hasFusedAdamW()) return this.#fused(grads, present, s)
    const c = this.config
    return tf.tidy(() => {
      // pairwise adds: one addN over every parameter would bind more buffers than a shader stage may have
      const sq = present.map((n) => tf.sum(tf.square(grads.get(n)!)))
      const norm = tf.sqrt(sq.reduce((a, b) => tf.add(a, b))) as tf.Scalar
      // clipScale on the device
      const scale =
        c.maxGradNorm === null
          ? tf.scalar(1)
          : tf.where(tf.greater(norm, c.maxGradNorm), tf.div(c.maxGradNorm, tf.add(norm, 1e-6)), tf.scalar(1))
      for (const name of present) {
        const p = this.#params.get(name)!,
          m = this.m.get(name)!,
          v = this.v.get(name)!
        const g = tf.mul(grads.get(name)!, scale)
        const m1 = tf.add(tf.mul(m, s.b1), tf.mul(g, s.c1))
        const v1 = tf.add(tf.mul(v, s.b2), tf.mul(tf.square(g), s.c2))
        const upd = tf.div(tf.mul(m1, s.step), tf.add(tf.sqrt(tf.mul(v1, s.rbc2)), s.eps))
        m.assign(m1)
        v.assign(v1)
        p.assign(tf.sub(tf.mul(p, s.keep(this.#decay.has(name))), upd))
      }
      return norm
    })
  }

  #fused(grads: ReadonlyMap<string, tf.Tensor>, present: readonly string[], s: AdamWStep): tf.Scalar {
    const c = this.config
    const norm = fusedGlobalNorm(present.map((n) => grads.get(n)!))
    for (const name of present) {
      const p = this.#params.get(name)!
      const next = fusedAdamW(grads.get(name)!, norm, p, this.m.get(name)!, this.v.get(name)!, {
        beta1: s.b1,
        beta2: s.b2,
        eps: s.eps,
        keep: s.keep(this.#decay.has(name)),
        step: s.step,
        rbc2: s.rbc2,
        maxNorm: c.maxGradNorm ?? 0,
      })
      p.assign(next)
      next.dispose()
    }
    return norm
  }

  /** Moments by name (`m.<param>`, `v.<param>`), for checkpoints (read back from the device). */
  async state(): Promise<Map<string, Float32Array>> {
    const out = new Map<string, Float32Array>()
    for (const [n, t] of this.m) out.set(`m.${n}`, (await t.data()) as Float32Array)
    for (const [n, t] of this.v) out.set(`v.${n}`, (await t.data()) as Float32Array)
    return out
  }

  /** Restore moments saved by {@link state} (or by the host {@link AdamW}), and the update count. */
  load(state: ReadonlyMap<string, Float32Array>, count: number): void {
    loadMoments(
      state,
      this,
      (t) => t.size,
      (t, d) => tf.tidy(() => t.assign(tf.tensor(d, t.shape))),
    )
    this.count = count
  }

  dispose(): void {
    for (const t of [...this.m.values(), ...this.v.values()]) t.dispose()
    this.m.clear()
    this.v.clear()
  }
}
