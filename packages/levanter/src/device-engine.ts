/**
 * @module The step on a device backend (webgpu, tensorflow): parameters, gradients, AdamW moments,
 * clipping and the loss stay on the device. A step uploads its batch; its loss and gradient norm
 * (8 bytes) stay on the device until asked for: {@link DeviceEngine.stepDeferred} reads nothing,
 * {@link DeviceEngine.readPending} reads every deferred step's pair in one asynchronous read (what
 * `Pipeline` does where it logs, evaluates, checkpoints or runs a hook). The engine counts both
 * directions.
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
  readonly inPlace = true
  /** Bytes moved by training steps so far (checkpoints and evaluation not counted). */
  readonly transferred: TransferBytes = { toDevice: 0, toHost: 0 }
  /** Bytes moved by the last step (its upload, and the read of the deferred results if it made one). */
  lastStep: TransferBytes = { toDevice: 0, toHost: 0 }
  /** Reads of step results so far. */
  reads = 0
  /** [loss, gradNorm] of each step not read yet, on the device. */
  #pending: tf.Tensor1D[] = []

  constructor(
    readonly model: CausalLM,
    adamw: AdamWConfig,
    readonly microbatches = 1,
  ) {
    this.opt = new DeviceAdamW(adamw, model)
  }

  ownedBytesPerMember(): number {
    return 12 * this.model.numParams()
  }

  /** One step that reads nothing back: its loss and gradient norm wait on the device for {@link readPending}. */
  async stepDeferred(batch: Batch, lr: number): Promise<void> {
    const { loss, grads, bytesToDevice } = computeGradsOnDevice(
      this.model,
      batch,
      Math.max(1, maskCount(batch)),
      this.microbatches,
    )
    let norm: tf.Scalar | undefined
    try {
      norm = this.opt.apply(grads, lr)
      this.#pending.push(tf.stack([loss, norm]) as tf.Tensor1D)
    } finally {
      tf.dispose([...grads.values(), loss, ...(norm ? [norm] : [])])
    }
    this.lastStep = { toDevice: bytesToDevice, toHost: 0 }
    this.transferred.toDevice += bytesToDevice
  }

  /** The results of the steps deferred since the last read, oldest first, in one read ([] when none). */
  async readPending(): Promise<StepResult[]> {
    const pending = this.#pending
    if (pending.length === 0) return []
    this.#pending = []
    const all = pending.length === 1 ? pending[0]! : tf.concat(pending)
    let d: Float32Array
    try {
      d = (await all.data()) as Float32Array
    } finally {
      tf.dispose(all === pending[0] ? pending : [...pending, all])
    }
    this.lastStep = { ...this.lastStep, toHost: this.lastStep.toHost + d.byteLength }
    this.transferred.toHost += d.byteLength
    this.reads++
    return Array.from({ length: pending.length }, (_, i) => ({ loss: d[2 * i]!, gradNorm: d[2 * i + 1]! }))
  }

  /** One step, read back with any deferred before it (their results are dropped: use {@link readPending} for them). */
  async step(batch: Batch, lr: number): Promise<StepResult> {
    await this.stepDeferred(batch, lr)
    return (await this.readPending()).at(-1)!
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
    tf.dispose(this.#pending)
    this.#pending = []
    this.opt.dispose()
  }
}
