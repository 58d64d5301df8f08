/**
 * @module The step on a device backend (webgpu, tensorflow): parameters, gradients, AdamW moments,
 * clipping and the loss stay on the device. A step uploads its batch and reads back 8 bytes (the
 * loss and the gradient norm, in one asynchronous read); the engine counts both directions.
 */
import * as tf from '@tensorflow/tfjs'
import type { Batch } from './data/batch.js'
import { maskCount } from './data/batch.js'
import type { Engine, StepResult, TrainTensors } from './engine.js'
import { maskedCrossEntropy } from './loss.js'
import type { CausalLM } from './models/lm.js'
import type { AdamWConfig } from './optim/adamw.js'
import { DeviceAdamW } from './optim/adamw-device.js'
import { batchTensors, computeGradsOnDevice } from './train-step.js'

/** Bytes moved between host and device. */
export type TransferBytes = { toDevice: number; toHost: number }

export class DeviceEngine implements Engine {
  readonly opt: DeviceAdamW
  /** Bytes moved by training steps so far (checkpoints and evaluation not counted). */
  readonly transferred: TransferBytes = { toDevice: 0, toHost: 0 }
  /** Bytes moved by the last step. */
  lastStep: TransferBytes = { toDevice: 0, toHost: 0 }

  constructor(
    readonly model: CausalLM,
    adamw: AdamWConfig,
    readonly microbatches = 1,
  ) {
    this.opt = new DeviceAdamW(adamw, model)
  }

  async step(batch: Batch, lr: number): Promise<StepResult> {
    const { loss, grads, bytesToDevice } = computeGradsOnDevice(
      this.model,
      batch,
      Math.max(1, maskCount(batch)),
      this.microbatches,
    )
    let norm: tf.Scalar | undefined
    try {
      norm = this.opt.apply(grads, lr)
    } finally {
      tf.dispose([...grads.values()])
    }
    const both = tf.stack([loss, norm])
    tf.dispose([loss, norm])
    const d = await both.data()
    both.dispose()
    this.lastStep = { toDevice: bytesToDevice, toHost: d.byteLength }
    this.transferred.toDevice += bytesToDevice
    this.transferred.toHost += d.byteLength
    return { loss: d[0]!, gradNorm: d[1]! }
  }

  async evalLoss(batch: Batch): Promise<number> {
    const loss = tf.tidy(() => {
      const { ids, targets, mask } = batchTensors(batch)
      return maskedCrossEntropy(this.model.forward(ids), targets, mask, Math.max(1, maskCount(batch)))
    })
    try {
      return (await loss.data())[0]!
    } finally {
      loss.dispose()
    }
  }

  async state(): Promise<TrainTensors> {
    return { weights: await this.model.weights(), optimizer: await this.opt.state(), count: this.opt.count }
  }

  async load(s: TrainTensors): Promise<void> {
    for (const [n, d] of s.weights) this.model.set(n, d)
    this.opt.load(s.optimizer, s.count)
  }

  async close(): Promise<void> {
    this.opt.dispose()
  }
}
