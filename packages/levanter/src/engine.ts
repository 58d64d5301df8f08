/**
 * @module Where a training step runs: the {@link Engine} every layout and backend implements, and
 * {@link LocalEngine}, the step in this process over the backend's kernels (the mesh engine,
 * parallel/mesh-engine.ts, runs it over several).
 */
import * as tf from '@tensorflow/tfjs'
import { isDeviceBackend } from './backend.js'
import type { Batch } from './data/batch.js'
import { maskCount } from './data/batch.js'
import { maskedCrossEntropy } from './loss.js'
import type { CausalLM } from './models/lm.js'
import { AdamW } from './optim/adamw.js'
import type { AdamWConfig } from './optim/adamw.js'
import { DeviceAdamW } from './optim/adamw-device.js'
import type { ShardBlobs, ShardedLayout, StoredShards } from './parallel/layout.js'
import { batchTensors, computeGrads, computeGradsOnDevice } from './train-step.js'

/** Model weights, optimizer moments and update count: everything a checkpoint holds of the math. */
export type TrainTensors = {
  readonly weights: Map<string, Float32Array>
  readonly optimizer: Map<string, Float32Array>
  readonly count: number
}

export type StepResult = { readonly loss: number; readonly gradNorm: number }

/** Bytes moved between host and device. */
export type TransferBytes = { toDevice: number; toHost: number }

/** Members that save and load their own parts of a sharded checkpoint: the driver reads no tensor. */
export interface ShardedCheckpoints {
  /** How the members hold the parameters, as a sharded checkpoint records it. */
  checkpointLayout(): ShardedLayout
  /** Every member writes its parts into the finestore at `storeUrl`; their blobs, in rank order. */
  writeShards(storeUrl: string): Promise<ShardBlobs[]>
  /** Every member reads its own parts of the sharded checkpoint `src` (whatever layout wrote it). */
  loadShards(storeUrl: string, src: StoredShards): Promise<void>
}

/**
 * A training step executor, whatever the layout and backend. Besides the step it says what the
 * pipeline asks of it: the memory each member keeps, whether it trains the caller's model in
 * place, whether its steps can be deferred, and whether its members checkpoint their own parts.
 */
export interface Engine {
  /** Bytes of parameters and AdamW moments kept by the member that keeps most (in one process 12 a parameter). */
  ownedBytesPerMember(): number
  /** It steps the caller's model itself; otherwise the trained weights come back through {@link state}. */
  readonly inPlace: boolean
  /** Present where members save and load their own parts of a sharded checkpoint. */
  readonly shards?: ShardedCheckpoints
  step(batch: Batch, lr: number): Promise<StepResult>
  /** On a device: a step that leaves its loss and gradient norm on the device, read later by {@link readPending}. */
  readonly stepDeferred?: (batch: Batch, lr: number) => Promise<void>
  /** On a device: the results of the deferred steps, oldest first, in one read. */
  readonly readPending?: () => Promise<StepResult[]>
  /** Mean masked loss of a batch (no update). */
  evalLoss(batch: Batch): Promise<number>
  state(): Promise<TrainTensors>
  load(state: TrainTensors): Promise<void>
  close(): Promise<void>
}

/** Mean masked loss of `batch` under `model`, read asynchronously (on any backend, webgpu included). */
export async function evalLossOf(model: CausalLM, batch: Batch): Promise<number> {
  const loss = tf.tidy(() => {
    const { ids, targets, mask } = batchTensors(batch)
    return maskedCrossEntropy(model.forward(ids), targets, mask, Math.max(1, maskCount(batch)))
  })
  try {
    return (await loss.data())[0]!
  } finally {
    loss.dispose()
  }
}

/**
 * Runs steps on the model in this process, over the backend's kernels. What the backend can do
 * decides the rest. On the CPU backends (wasm, cpu) a step reads its loss as it computes it, and
 * AdamW updates the parameters over host arrays (the native kernel where it runs). Where the
 * backend keeps tensors on a device (webgpu, tensorflow), parameters, gradients, AdamW moments,
 * clipping and the loss stay there ({@link DeviceAdamW}), and the engine has the device's
 * capabilities: {@link stepDeferred} leaves a step's loss and gradient norm (8 bytes) on the
 * device, and {@link readPending} reads every deferred step's pair in one asynchronous read (what
 * `Pipeline` does where it logs, evaluates, checkpoints or runs a hook). It counts the bytes moved.
 */
export class LocalEngine implements Engine {
  readonly opt: AdamW | DeviceAdamW
  readonly inPlace = true
  /** Bytes moved by training steps on a device so far (checkpoints and evaluation not counted; 0 off a device). */
  readonly transferred: TransferBytes = { toDevice: 0, toHost: 0 }
  /** On a device: bytes moved by the last step (its upload, and the read of the deferred results if it made one). */
  lastStep: TransferBytes = { toDevice: 0, toHost: 0 }
  /** On a device: reads of step results so far. */
  reads = 0
  readonly stepDeferred?: (batch: Batch, lr: number) => Promise<void>
  readonly readPending?: () => Promise<StepResult[]>
  /** [loss, gradNorm] of each deferred step not read yet, on the device. */
  #pending: tf.Tensor1D[] = []

  /** Call once the backend is chosen (`initBackend`): its kind picks the optimizer and the capabilities. */
  constructor(
    readonly model: CausalLM,
    adamw: AdamWConfig,
    readonly microbatches = 1,
  ) {
    if (isDeviceBackend()) {
      const opt = new DeviceAdamW(adamw, model)
      this.opt = opt
      this.stepDeferred = (batch, lr) => this.#deviceStep(opt, batch, lr)
      this.readPending = () => this.#readPending()
    } else this.opt = new AdamW(adamw, model)
  }

  ownedBytesPerMember(): number {
    return 12 * this.model.numParams()
  }

  /** One step; on a device read back with any deferred before it (their results are dropped: use
   * {@link readPending} for them). */
  async step(batch: Batch, lr: number): Promise<StepResult> {
    const opt = this.opt
    if (opt instanceof DeviceAdamW) {
      await this.#deviceStep(opt, batch, lr)
      return (await this.#readPending()).at(-1)!
    }
    const { loss, grads } = computeGrads(this.model, batch, Math.max(1, maskCount(batch)), this.microbatches)
    try {
      return { loss, gradNorm: opt.apply(grads, lr) }
    } finally {
      tf.dispose([...grads.values()])
    }
  }

  /** A step on the device that reads nothing back: its loss and gradient norm wait there for {@link readPending}. */
  async #deviceStep(opt: DeviceAdamW, batch: Batch, lr: number): Promise<void> {
    const { loss, grads, bytesToDevice } = computeGradsOnDevice(
      this.model,
      batch,
      Math.max(1, maskCount(batch)),
      this.microbatches,
    )
    let norm: tf.Scalar | undefined
    try {
      norm = opt.apply(grads, lr)
      this.#pending.push(tf.stack([loss, norm]) as tf.Tensor1D)
    } finally {
      tf.dispose([...grads.values(), loss, ...(norm ? [norm] : [])])
    }
    this.lastStep = { toDevice: bytesToDevice, toHost: 0 }
    this.transferred.toDevice += bytesToDevice
  }

  /** The results of the steps deferred since the last read, oldest first, in one read ([] when none). */
  async #readPending(): Promise<StepResult[]> {
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

  async evalLoss(batch: Batch): Promise<number> {
    return evalLossOf(this.model, batch)
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
