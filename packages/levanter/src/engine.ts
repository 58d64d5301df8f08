/** @module Where a training step runs: in this process, or over data-parallel replicas. */
import * as tf from '@tensorflow/tfjs'
import type { Batch } from './data/batch.js'
import { maskCount } from './data/batch.js'
import { maskedCrossEntropy } from './loss.js'
import type { CausalLM } from './models/lm.js'
import { AdamW } from './optim/adamw.js'
import type { AdamWConfig } from './optim/adamw.js'
import type { ShardBlobs, ShardedLayout, StoredShards } from './parallel/layout.js'
import { batchTensors, computeGrads } from './train-step.js'

/** Model weights, optimizer moments and update count: everything a checkpoint holds of the math. */
export type TrainTensors = {
  readonly weights: Map<string, Float32Array>
  readonly optimizer: Map<string, Float32Array>
  readonly count: number
}

export type StepResult = { readonly loss: number; readonly gradNorm: number }

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
  stepDeferred?(batch: Batch, lr: number): Promise<void>
  /** On a device: the results of the deferred steps, oldest first, in one read. */
  readPending?(): Promise<StepResult[]>
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
    return maskedCrossEntropy(model.forward(ids), targets, mask)
  })
  try {
    return (await loss.data())[0]!
  } finally {
    loss.dispose()
  }
}

/** Runs steps on the model in this process. */
export class LocalEngine implements Engine {
  readonly opt: AdamW
  readonly inPlace = true
  constructor(
    readonly model: CausalLM,
    adamw: AdamWConfig,
    readonly microbatches = 1,
  ) {
    this.opt = new AdamW(adamw, model)
  }
  ownedBytesPerMember(): number {
    return 12 * this.model.numParams()
  }
  async step(batch: Batch, lr: number): Promise<StepResult> {
    const { loss, grads } = computeGrads(this.model, batch, Math.max(1, maskCount(batch)), this.microbatches)
    try {
      return { loss, gradNorm: this.opt.apply(grads, lr) }
    } finally {
      tf.dispose([...grads.values()])
    }
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
    this.opt.dispose()
  }
}
