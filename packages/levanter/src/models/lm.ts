/** @module Causal language models: `Gpt2LM` and `LlamaLM` hold a config and their parameters as tf.Variables. */
import * as tf from '@tensorflow/tfjs'
import { LevanterError } from '../errors.js'
import { normalArray, seedFor } from '../rng.js'
import { Gpt2Config, LlamaConfig, ModelConfig } from './config.js'
import type { Gpt2ConfigInput, LlamaConfigInput, ModelConfigInput } from './config.js'
import { gpt2Forward, gpt2Specs } from './gpt2.js'
import type { LayerKv } from './batch-cache.js'
import type { ForwardArgs, ForwardResult, Placement } from './layers.js'
import { llamaForward, llamaSpecs } from './llama.js'
import type { ParamSpec } from './param-spec.js'

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

  /** Parameters touched per token by matmuls, for model FLOPs (6·N + attention per token). */
  flopsPerToken(seqLen: number): number {
    const c = this.config
    const embed = c.type === 'gpt2' ? c.seqLen * c.dModel : 0 // position table is a lookup, not a matmul
    const n = this.numParams() - embed
    return 6 * n + 12 * c.nLayers * c.dModel * seqLen
  }

  protected abstract run(...args: ForwardArgs): ForwardResult

  /** ids [B, T] → logits [B, T, V], every row at positions 0…T-1. */
  forward(ids: tf.Tensor): tf.Tensor {
    return this.forwardWith((n) => this.param(n), ids)
  }

  /** Forward with parameters from `p` (replicas, gradients over other tensors). */
  forwardWith(p: (name: string) => tf.Tensor, ids: tf.Tensor): tf.Tensor {
    const T = ids.shape[1]!
    if (T > this.config.seqLen) {
      throw new LevanterError(
        'BAD_SHAPE',
        `input: ${T} positions exceed the model's seqLen ${this.config.seqLen}; shorten the input`,
      )
    }
    return tf.tidy(() => this.run(p, ids, { offset: 0 }, undefined, false, false).logits)
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
    return this.run((n) => this.param(n), ids, at, past, lastOnly)
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

/** GPT-2 language model. @example new Gpt2LM({ vocabSize: 512, seqLen: 128, dModel: 256, nLayers: 4, nHeads: 4 }) */
export class Gpt2LM extends CausalLM<Gpt2Config> {
  constructor(config: Omit<Gpt2ConfigInput, 'type'> & { type?: 'gpt2' }, seed = 0) {
    const c = Gpt2Config.parse({ ...config, type: 'gpt2' })
    super(c, gpt2Specs(c), seed)
  }
  protected run(...args: ForwardArgs): ForwardResult {
    return gpt2Forward(this.config, ...args)
  }
}

/** Llama language model. @example new LlamaLM({ vocabSize: 512, seqLen: 128, dModel: 256, nLayers: 4, nHeads: 4 }) */
export class LlamaLM extends CausalLM<LlamaConfig> {
  constructor(config: Omit<LlamaConfigInput, 'type'> & { type?: 'llama' }, seed = 0) {
    const c = LlamaConfig.parse({ ...config, type: 'llama' })
    if (c.nKvHeads !== undefined && c.nHeads % c.nKvHeads !== 0)
      throw new LevanterError(
        'BAD_CONFIG',
        `model: nHeads ${c.nHeads} is not a multiple of nKvHeads ${c.nKvHeads}; ` +
          `each key/value head serves the same number of query heads`,
      )
    super(c, llamaSpecs(c), seed)
  }
  protected run(...args: ForwardArgs): ForwardResult {
    return llamaForward(this.config, ...args)
  }
}

function parseModelConfig(config: ModelConfigInput): ModelConfig {
  const parsed = ModelConfig.safeParse(config)
  if (!parsed.success)
    throw new LevanterError(
      'BAD_CONFIG',
      `model config: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`,
    )
  return parsed.data
}

/** Build the model a config names. */
export function createModel(config: ModelConfigInput, seed = 0): CausalLM {
  const c = parseModelConfig(config)
  return c.type === 'gpt2' ? new Gpt2LM(c, seed) : new LlamaLM(c, seed)
}

/** The parameters the model a config names has, in its order, without building it (nothing allocated). */
export function specsOf(config: ModelConfigInput): ParamSpec[] {
  const c = parseModelConfig(config)
  return c.type === 'gpt2' ? gpt2Specs(c) : llamaSpecs(c)
}
