/**
 * @module Data-parallel engine: N replicas as fray actors over a `{ data: N }` mesh, driven step by
 * step. Under a webgpu driver the replicas run on webgpu (replica.ts: one gradient read a step).
 */
import * as tf from '@tensorflow/tfjs'
import { actorClass, currentClient, Mesh } from '@marin/fray'
import type { ActorGroup } from '@marin/fray'
import { maskCount } from '../data/batch.js'
import type { Batch } from '../data/batch.js'
import type { Engine, StepResult, TrainTensors } from '../engine.js'
import { architectureModule } from '../models/lm.js'
import type { CausalLM } from '../models/lm.js'
import { replicaThreadsEnv } from '../kernels/native-gemm.js'
import type { AdamWConfig } from '../optim/adamw.js'
import type { Replica, ReplicaOptions } from './replica.js'
import { allMembers } from './all-members.js'
import { FailedMembers } from './failed-members.js'
import { copyRows, fromWire, toWire } from './wire.js'

const ReplicaClass = actorClass<typeof Replica>(new URL('./replica.ts', import.meta.url), 'Replica')

export class DataParallelEngine implements Engine {
  /** Process ids of the replicas, in rank order (after the first load). */
  pids: number[] = []
  readonly inPlace = false
  /** Members that failed a call, stopped with a bound at close. */
  readonly #failed = new FailedMembers()
  private constructor(
    readonly group: ActorGroup<Replica>,
    readonly n: number,
    readonly numParams: number,
  ) {}

  /** Every replica keeps the whole model and its moments. */
  ownedBytesPerMember(): number {
    return 12 * this.numParams
  }

  /** Start `n` replicas holding `model`'s current weights and fresh optimizer state (`opts`: how they reduce). */
  static async create(
    model: CausalLM,
    adamw: AdamWConfig,
    n: number,
    microbatches = 1,
    opts: ReplicaOptions = {},
  ): Promise<DataParallelEngine> {
    // replicas follow a webgpu driver onto the device
    if (tf.getBackend() === 'webgpu') opts = { ...opts, backend: 'webgpu' }
    // replicas import a user's architecture from the module that registered it
    const module = architectureModule(model.config.type)
    if (module) opts = { ...opts, architectureModule: module }
    // each replica's native kernels get its share of the cores
    const group = await currentClient().createActorGroup(
      ReplicaClass,
      n,
      () => [model.config, adamw, microbatches, opts],
      {
        env: replicaThreadsEnv(n),
      },
    )
    await group.waitReady()
    await Mesh.create(group, { data: n })
    const engine = new DataParallelEngine(group, n, model.numParams())
    const optimizer = new Map<string, Float32Array>()
    for (const [k, v] of model.params) {
      optimizer.set(`m.${k}`, new Float32Array(v.size))
      optimizer.set(`v.${k}`, new Float32Array(v.size))
    }
    await engine.load({ weights: await model.weights(), optimizer, count: 0 })
    return engine
  }

  #all<T>(what: string, calls: Promise<T>[]): Promise<T[]> {
    return this.#failed.watch(this.group, calls, (c) =>
      allMembers(this.group, this.n, { engine: 'data-parallel', member: 'replica' }, what, c),
    )
  }

  async load(state: TrainTensors): Promise<void> {
    const wire = toWire(state)
    this.pids = await this.#all(
      'load',
      this.group.members.map((m) => m.load(wire)),
    )
  }

  async step(batch: Batch, lr: number): Promise<StepResult> {
    const per = batch.batchSize / this.n
    const denom = Math.max(1, maskCount(batch))
    const results = await this.#all(
      'step',
      this.group.members.map((m, i) => m.step(copyRows(batch, i * per, (i + 1) * per), denom, lr)),
    )
    return results[0]!
  }

  async evalLoss(batch: Batch): Promise<number> {
    return (await this.#all('eval', [this.group.member(0).evalLoss(batch)]))[0]!
  }

  async state(): Promise<TrainTensors> {
    return fromWire((await this.#all('state', [this.group.member(0).state()]))[0]!)
  }

  /**
   * Stops the members; one that failed a call (named in REPLICA_FAILED) is waited for a few seconds
   * at most, so a member behind a partition does not hold the close up (failed-members.ts).
   */
  async close(): Promise<void> {
    await this.#failed.stop(this.group)
  }
}
