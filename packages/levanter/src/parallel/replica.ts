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
import type { StepResult } from '../engine.js'
import { createModel } from '../models/lm.js'
import type { CausalLM } from '../models/lm.js'
import type { ModelConfig } from '../models/config.js'
import { AdamW } from '../optim/adamw.js'
import type { AdamWConfig } from '../optim/adamw.js'
import { computeGrads, flattenGrads } from '../train-step.js'
import { fromWire, toWire } from './wire.js'
import type { WireTensors } from './wire.js'

/** Where one replica step's time went, in milliseconds of wall time, and the CPU time the process used (on a shared
 * machine, the work itself). */
export type StepPhases = {
  readonly grads: number
  readonly flatten: number
  readonly allReduce: number
  readonly apply: number
  readonly cpu: number
}

const cpuMs = (): number => {
  const u = process.cpuUsage()
  return (u.user + u.system) / 1000
}

const KEEP_PHASES = 100

export class Replica {
  #model: CausalLM | undefined
  #opt: AdamW | undefined
  readonly #phases: StepPhases[] = []
  #flat: Float32Array | undefined // the step's gradient buffer, reused: nothing holds it past the step

  constructor(
    readonly modelConfig: ModelConfig,
    readonly adamw: AdamWConfig,
    readonly microbatches: number,
  ) {}

  /** Start the backend, build the model, take the driver's weights and optimizer state. */
  async load(wire: WireTensors): Promise<number> {
    const state = fromWire(wire)
    await initBackend()
    this.#model ??= createModel(this.modelConfig)
    this.#opt ??= new AdamW(this.adamw, this.#model)
    for (const [n, d] of state.weights) this.#model.set(n, d)
    this.#opt.load(state.optimizer, state.count)
    return process.pid
  }

  /**
   * Gradients on `slice`, summed over the mesh, then one AdamW step. Returns the global loss.
   * The gradients travel as one flat buffer with the loss in its last slot: one collective per
   * step, reduced in place, and the optimizer reads the sum straight from it.
   */
  async step(slice: Batch, denominator: number, lr: number): Promise<StepResult> {
    const model = this.#model!,
      opt = this.#opt!
    const names = [...model.params.keys()]
    const c0 = cpuMs(),
      t0 = performance.now()
    const local = computeGrads(model, slice, denominator, this.microbatches)
    const t1 = performance.now()
    const flat = (this.#flat = flattenGrads(local.grads, names, 1, this.#flat))
    tf.dispose([...local.grads.values()])
    flat[flat.length - 1] = local.loss
    const t2 = performance.now()
    await currentMesh().allReduce(flat, { op: 'sum', out: flat })
    const t3 = performance.now()
    const loss = flat[flat.length - 1]!
    const gradNorm = opt.applyFlat(flat.subarray(0, flat.length - 1), lr)
    const t4 = performance.now()
    this.#phases.push({ grads: t1 - t0, flatten: t2 - t1, allReduce: t3 - t2, apply: t4 - t3, cpu: cpuMs() - c0 })
    if (this.#phases.length > KEEP_PHASES) this.#phases.shift()
    return { loss, gradNorm }
  }

  async evalLoss(batch: Batch): Promise<number> {
    return evalLossOf(this.#model!, batch)
  }

  async state(): Promise<WireTensors> {
    return toWire({
      weights: await this.#model!.weights(),
      optimizer: await this.#opt!.state(),
      count: this.#opt!.count,
    })
  }

  /** The phases of this replica's latest steps (up to 100), oldest first. */
  phases(): StepPhases[] {
    return [...this.#phases]
  }

  /** Live tensors in this replica (leak checks) and its peak resident memory. */
  memory(): { numTensors: number; numBytes: number; peakRssMiB: number } {
    const m = tf.memory()
    return { numTensors: m.numTensors, numBytes: m.numBytes, peakRssMiB: process.resourceUsage().maxRSS / 1024 }
  }
}
