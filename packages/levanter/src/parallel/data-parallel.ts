/** @module Data-parallel engine: N replicas as fray actors over a `{ data: N }` mesh, driven step by step. */
import { actorClass, currentClient, Mesh } from '@marin/fray'
import type { ActorGroup } from '@marin/fray'
import { logger } from '@marin/rigging'
import { maskCount, sliceBatch } from '../data/batch.js'
import type { Batch } from '../data/batch.js'
import type { Engine, StepResult, TrainTensors } from '../engine.js'
import { LevanterError } from '../errors.js'
import type { CausalLM } from '../models/lm.js'
import { replicaThreadsEnv } from '../kernels/native-gemm.js'
import type { AdamWConfig } from '../optim/adamw.js'
import type { Replica } from './replica.js'
import { fromWire, toWire } from './wire.js'

const log = logger('levanter')
// Copies, so structured clone sends only this slice's bytes, not the whole batch's buffer.
const copyRows = (b: Batch, from: number, to: number): Batch => {
  const s = sliceBatch(b, from, to)
  return { ...s, inputs: s.inputs.slice(), targets: s.targets.slice(), mask: s.mask.slice() }
}
const ReplicaClass = actorClass<typeof Replica>(new URL('./replica.ts', import.meta.url), 'Replica')

export class DataParallelEngine implements Engine {
  /** Process ids of the replicas, in rank order (after the first load). */
  pids: number[] = []
  private constructor(
    readonly group: ActorGroup<Replica>,
    readonly n: number,
  ) {}

  /** Start `n` replicas holding `model`'s current weights and fresh optimizer state. */
  static async create(model: CausalLM, adamw: AdamWConfig, n: number, microbatches = 1): Promise<DataParallelEngine> {
    // each replica's native kernels get its share of the cores
    const group = await currentClient().createActorGroup(ReplicaClass, n, () => [model.config, adamw, microbatches], {
      env: replicaThreadsEnv(n),
    })
    await group.waitReady()
    await Mesh.create(group, { data: n })
    const engine = new DataParallelEngine(group, n)
    const optimizer = new Map<string, Float32Array>()
    for (const [k, v] of model.params) {
      optimizer.set(`m.${k}`, new Float32Array(v.size))
      optimizer.set(`v.${k}`, new Float32Array(v.size))
    }
    await engine.load({ weights: await model.weights(), optimizer, count: 0 })
    return engine
  }

  async #all<T>(what: string, calls: Promise<T>[]): Promise<T[]> {
    // Wait for every call to settle: when one replica dies, a survivor's collective
    // often fails first (its peer disconnected), before the dead one is known as gone.
    const settled = await Promise.allSettled(calls)
    const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected')
    if (!failed) return settled.map((r) => (r as PromiseFulfilledResult<T>).value)
    const err: unknown = failed.reason
    const gone = this.group.gone()
    log.error({ err, gone }, 'replica failed')
    throw new LevanterError(
      'REPLICA_FAILED',
      `data-parallel ${what}: ` +
        `${gone.length > 1 ? 'replicas' : 'replica'} ` +
        `${gone.length ? gone.join(', ') : '?'} of ${this.n} failed (` +
        `${(err as Error).message}); the step was not applied — resume ` +
        `from the last checkpoint`,
      { cause: err },
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

  async close(): Promise<void> {
    await this.group.shutdown()
  }
}
