/** @module `CausalLM`: a causal language model holding its config and its parameters as tf.Variables. */
import * as tf from '@tensorflow/tfjs'
import { LevanterError } from '../errors.js'
import { normalArray, seedFor } from '../rng.js'
import type { LayerKv } from './batch-cache.js'
import type { ModelConfig } from './config.js'
import type { ForwardArgs, ForwardResult, Placement } from './layers.js'
import type { ParamSpec } from './param-spec.js'
import { findArchitecture, transformerFlops } from './registry.js'

let variableCount = 0 // tf variable names must be unique in a process

/** What every model does: forward passes over named parameters, whole sequences or placed rows after cached
 * keys/values. */
export abstract class CausalLM<C extends ModelConfig = ModelConfig> {
  readonly specs: readonly ParamSpec[]
  readonly params = new Map<string, tf.Variable>()

  protected constructor(
    readonly config: C,
    specs: ParamSpec[],
    readonly seed: number,
  ) {
    if (config.dModel % config.nHeads !== 0) {
      throw new LevanterError(
        'BAD_CONFIG',
        `model: dModel ${config.dModel} is not a multiple of nHeads ${config.nHeads}; change one of them`,
      )
    }
    this.specs = specs
    this.init(seed)
  }

  /** Re-initialize every parameter from `seed` (each from its own stream: stable across backends and layouts). */
  init(seed: number): void {
    for (const s of this.specs) {
      const n = s.shape.reduce((a, b) => a * b, 1)
      const data =
        s.init === 'ones'
          ? new Float32Array(n).fill(1)
          : s.init === 'zeros'
            ? new Float32Array(n)
            : normalArray(n, s.init.std, seedFor(seed, s.name))
      this.set(s.name, data)
    }
  }

  /** Overwrite one parameter's values (shape checked). */
  set(name: string, data: Float32Array): void {
    const spec = this.specs.find((s) => s.name === name)
    if (!spec)
      throw new LevanterError(
        'BAD_CHECKPOINT',
        `model has no parameter "${name}"; check the checkpoint matches the model type`,
      )
    const n = spec.shape.reduce((a, b) => a * b, 1)
    if (data.length !== n)
      throw new LevanterError(
        'BAD_SHAPE',
        `parameter "${name}": got ${data.length} values, expected ${n} for shape [${spec.shape.join(', ')}]`,
      )
    const old = this.params.get(name)
    // the variable takes its own reference to the values: the temporary tensor is dropped, so the
    // parameter's buffer has one owner (AdamW then updates it in place on wasm)
    const t = tf.tensor(data, [...spec.shape])
    if (old) old.assign(t)
    else this.params.set(name, tf.variable(t, true, `${name}#${++variableCount}`))
    t.dispose()
  }

  /** The parameters that take weight decay (matrices and embeddings, `ParamSpec.decay`): with `params`, what the
   * optimizers (optim/) update. */
  get decay(): ReadonlySet<string> {
    return new Set(this.specs.filter((s) => s.decay).map((s) => s.name))
  }

  /** Number of scalar parameters. */
  numParams(): number {
    return this.specs.reduce((a, s) => a + s.shape.reduce((x, y) => x * y, 1), 0)
  }

  /** Model FLOPs per token at context `seqLen`, as its architecture counts them (6 per matmul parameter +
   * attention, registry.ts `transformerFlops`, for an unregistered one). */
  flopsPerToken(seqLen: number): number {
    const arch = findArchitecture(this.config.type)
    if (arch) return arch.flopsPerToken(this.config, seqLen, this.numParams())
    return transformerFlops(this.config, seqLen, this.numParams()) // a model of no registered architecture
  }

  protected abstract run(...args: ForwardArgs): ForwardResult

  /** ids [B, T] → logits [B, T, V], every row at positions 0…T-1. */
  forward(ids: tf.Tensor): tf.Tensor {
    return this.forwardWith((n) => this.param(n), ids)
  }

  /** Forward with parameters from `p` (replicas, gradients over other tensors). */
  forwardWith(p: (name: string) => tf.Tensor, ids: tf.Tensor): tf.Tensor {
    this.#checkLength(ids)
    return tf.tidy(() => this.run(p, ids, { offset: 0 }, undefined, false, false).logits)
  }

  #checkLength(ids: tf.Tensor): void {
    const T = ids.shape[1]!
    if (T > this.config.seqLen) {
      throw new LevanterError(
        'BAD_SHAPE',
        `input: ${T} positions exceed the model's seqLen ${this.config.seqLen}; shorten the input`,
      )
    }
  }

  /** ids [B, T] → logits [B, T, V] and the architecture's auxiliary loss per row [B], if it has one (training). */
  forwardTraining(ids: tf.Tensor): { logits: tf.Tensor; aux?: tf.Tensor } {
    this.#checkLength(ids)
    return tf.tidy(() => {
      const { logits, aux } = this.run((n) => this.param(n), ids, { offset: 0 }, undefined, false, false)
      return aux ? { logits, aux } : { logits }
    })
  }

  /**
   * ids [B, T] placed by `at` (each row at its own positions, models/layers.ts), attending to the
   * cached keys/values `past` ([B, H, S, K] per layer) and themselves: logits [B, T, V] ([B, 1, V]
   * with `lastOnly`) and every layer's keys/values, `past` included. Tensors are the caller's: run
   * it inside `tf.tidy`. Batched decoding (models/decode.ts) is built on it.
   */
  forwardPlaced(
    ids: tf.Tensor,
    at: Placement,
    past?: readonly LayerKv[],
    lastOnly = false,
  ): { logits: tf.Tensor; kv: LayerKv[] } {
    const { logits, kv, aux } = this.run((n) => this.param(n), ids, at, past, lastOnly)
    aux?.dispose() // a training loss, of no use to decoding (a caller's tidy keeping the result would keep it too)
    return { logits, kv }
  }

  param(name: string): tf.Variable {
    const v = this.params.get(name)
    if (!v) throw new LevanterError('BAD_CONFIG', `model has no parameter "${name}"`)
    return v
  }

  /** Values of every parameter, by name (copies). */
  async weights(): Promise<Map<string, Float32Array>> {
    const out = new Map<string, Float32Array>()
    for (const [n, v] of this.params) out.set(n, (await v.data()) as Float32Array)
    return out
  }

  dispose(): void {
    for (const v of this.params.values()) v.dispose()
    this.params.clear()
  }
}
