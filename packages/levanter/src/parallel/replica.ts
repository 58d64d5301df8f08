/**
 * @module One data-parallel replica, run as a fray actor: it holds a copy of the model and the
 * optimizer, computes gradients on its slice of the global batch, all-reduces them over the mesh
 * (sum; each replica's loss is already divided by the global token count), and applies the update.
 * Every replica applies identical bits, so the copies never drift.
 */
import * as tf from '@tensorflow/tfjs'
import { currentMesh } from '@marin/fray'
import { initBackend } from '../backend.js'
import type { Batch } from '../data/batch.js'
import { evalLossOf } from '../engine.js'
import type { StepResult, TrainTensors } from '../engine.js'
import { createModel } from '../models/lm.js'
import type { CausalLM } from '../models/lm.js'
import type { ModelConfig } from '../models/config.js'
import { AdamW } from '../optim/adamw.js'
import type { AdamWConfig } from '../optim/adamw.js'
import { computeGrads, flattenGrads, unflattenGrads } from '../train-step.js'

export class Replica {
  #model: CausalLM | undefined
  #opt: AdamW | undefined

  constructor(
    readonly modelConfig: ModelConfig,
    readonly adamw: AdamWConfig,
    readonly microbatches: number,
  ) {}

  /** Start the backend, build the model, take the driver's weights and optimizer state. */
  async load(state: TrainTensors): Promise<number> {
    await initBackend()
    this.#model ??= createModel(this.modelConfig)
    this.#opt ??= new AdamW(this.adamw, this.#model)
    for (const [n, d] of state.weights) this.#model.set(n, d)
    this.#opt.load(state.optimizer, state.count)
    return process.pid
  }

  /** Gradients on `slice`, summed over the mesh, then one AdamW step. Returns the global loss. */
  async step(slice: Batch, denominator: number, lr: number): Promise<StepResult> {
    const model = this.#model!, opt = this.#opt!
    const names = [...model.params.keys()]
    const local = computeGrads(model, slice, denominator, this.microbatches)
    const flat = flattenGrads(local.grads, names)
    tf.dispose([...local.grads.values()])
    const mesh = currentMesh()
    const summed = await mesh.allReduce(flat, { op: 'sum' })
    const loss = (await mesh.allReduce(new Float32Array([local.loss]), { op: 'sum' }))[0]!
    const grads = unflattenGrads(summed, model)
    try {
      return { loss, gradNorm: opt.apply(grads, lr) }
    } finally {
      tf.dispose([...grads.values()])
    }
  }

  async evalLoss(batch: Batch): Promise<number> {
    return evalLossOf(this.#model!, batch)
  }

  async state(): Promise<TrainTensors> {
    return { weights: await this.#model!.weights(), optimizer: await this.#opt!.state(), count: this.#opt!.count }
  }

  /** Live tensors in this replica (leak checks) and its peak resident memory. */
  memory(): { numTensors: number; numBytes: number; peakRssMiB: number } {
    const m = tf.memory()
    return { numTensors: m.numTensors, numBytes: m.numBytes, peakRssMiB: process.resourceUsage().maxRSS / 1024 }
  }
}
