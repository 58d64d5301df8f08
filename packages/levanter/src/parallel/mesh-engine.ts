/**
 * @module Mesh engine: data × model members as fray actors over a `{ data, model }` mesh,
 * replicated or fsdp over `data`, tensor-parallel over `model` (layout.ts says what each holds).
 * It is levanter's one engine for more than one process: plain data parallel is `{ data: N }` at
 * model 1 (each member a replica of the whole model, mesh-replica.ts). The driver hands each
 * member its rows of the global batch and, to load and save, cuts full tensors into the members'
 * parts and joins them back, so a state saved on one mesh loads on any. Under a webgpu driver the
 * members run on webgpu.
 */
import * as tf from '@tensorflow/tfjs'
import { actorClass, currentClient, Mesh } from '@marin/fray'
import type { ActorGroup } from '@marin/fray'
import { maskCount } from '../data/batch.js'
import type { Batch } from '../data/batch.js'
import type { Engine, ShardedCheckpoints, StepResult, TrainTensors } from '../engine.js'
import { replicaThreadsEnv } from '../kernels/native-gemm.js'
import { architectureModule, specsOf } from '../models/lm.js'
import type { CausalLM } from '../models/lm.js'
import { ModelConfig } from '../models/config.js'
import type { ModelConfigInput } from '../models/config.js'
import type { ParamSpec } from '../models/param-spec.js'
import type { AdamWConfig } from '../optim/adamw.js'
import { assembleMembers, checkModelAxis, coordsOfRank, cutForMember, localParams } from './layout.js'
import type { LocalParam, MeshShape, PartTensors, ShardBlobs, ShardedLayout, StoredShards } from './layout.js'
import type { MeshReplica } from './mesh-replica.js'
import { allMembers } from './all-members.js'
import type { MemberNames } from './all-members.js'
import { FailedMembers } from './failed-members.js'
import { copyRows, fromWire, toWire } from './wire.js'

const MeshReplicaClass = actorClass<typeof MeshReplica>(new URL('./mesh-replica.ts', import.meta.url), 'MeshReplica')

export type MeshEngineOptions = {
  readonly mesh: MeshShape
  /** Shard parameters and AdamW state over `data`. @default false */
  readonly fsdp?: boolean
  /** @default 1 */
  readonly microbatches?: number
  /** Reduce the gradients over data during the backward pass: fsdp reduce-scatters each stage's, replicas
   * all-reduce buckets (the same bits either way). @default true */
  readonly overlapReduce?: boolean
  /** Replicas (model 1, not fsdp): bytes of gradients per bucket of the all-reduce (at least). @default 4 MiB */
  readonly bucketBytes?: number
  /** The products' operands in the members' steps and evaluations (mesh-replica.ts). @default 'fp32' */
  readonly precision?: 'fp32' | 'bf16'
}

export class MeshEngine implements Engine, ShardedCheckpoints {
  readonly inPlace = false
  /** Members that failed a call, stopped with a bound at close. */
  readonly #failed = new FailedMembers()
  /** Its members checkpoint their own parts; replicas of the whole model (model 1, not fsdp) do not: the driver
   * saves one copy, as one process does. */
  readonly shards?: ShardedCheckpoints
  /** Process ids of the members, in rank order (after the first load). */
  pids: number[] = []
  /** The files (and their bytes) each member read at the last {@link loadShards}, in rank order. */
  shardReads: { files: string[]; bytes: number }[] = []
  readonly layout: readonly LocalParam[]

  private constructor(
    readonly group: ActorGroup<MeshReplica>,
    readonly mesh: MeshShape,
    readonly fsdp: boolean,
    config: ModelConfig,
    specs: readonly ParamSpec[],
  ) {
    this.layout = localParams(config, specs, mesh, fsdp)
    if (!this.replicated) this.shards = this
  }

  /** Every member holds the whole model (model 1, not fsdp): plain data parallel, its members replicas. */
  get replicated(): boolean {
    return this.mesh.model === 1 && !this.fsdp
  }

  get size(): number {
    return this.mesh.data * this.mesh.model
  }

  /** Starts data × model members holding `model`'s current weights and fresh optimizer state. */
  static async create(model: CausalLM, adamw: AdamWConfig, opts: MeshEngineOptions): Promise<MeshEngine> {
    const engine = await MeshEngine.#start(model.config, model.specs, adamw, opts)
    await engine.load({ weights: await model.weights(), optimizer: new Map(), count: 0 })
    return engine
  }

  /**
   * Starts data × model members that draw their own parts of the initial weights of the model
   * `config` names (the values `createModel(config, seed)` holds) and fresh optimizer state: this
   * process never holds the model, and under fsdp no process holds a whole parameter, so a model
   * too large for one process starts. @example await MeshEngine.init(config, 0, adamw, { mesh: { data: 2, model: 1 },
   * fsdp: true })
   */
  static async init(
    config: ModelConfigInput,
    seed: number,
    adamw: AdamWConfig,
    opts: MeshEngineOptions,
  ): Promise<MeshEngine> {
    const parsed = ModelConfig.parse(config)
    const engine = await MeshEngine.#start(parsed, specsOf(parsed), adamw, opts)
    try {
      engine.pids = await engine.#all(
        'init',
        engine.group.members.map((m) => m.init(seed)),
      )
    } catch (err) {
      await engine.close()
      throw err
    }
    return engine
  }

  static async #start(
    config: ModelConfig,
    specs: readonly ParamSpec[],
    adamw: AdamWConfig,
    opts: MeshEngineOptions,
  ): Promise<MeshEngine> {
    const { mesh } = opts
    checkModelAxis(config, mesh.model)
    const fsdp = opts.fsdp ?? false
    const n = mesh.data * mesh.model
    const module = architectureModule(config.type) // members import a user's architecture from it
    const replica = {
      mesh,
      fsdp,
      microbatches: opts.microbatches ?? 1,
      overlapReduce: opts.overlapReduce ?? true,
      ...(opts.bucketBytes ? { bucketBytes: opts.bucketBytes } : {}),
      ...(opts.precision === 'bf16' ? { precision: 'bf16' as const } : {}),
      // members follow a webgpu driver onto the device (they read tensors asynchronously only)
      ...(tf.getBackend() === 'webgpu' ? { backend: 'webgpu' as const } : {}),
      ...(module ? { architectureModule: module } : {}),
    }
    // each member's native kernels get its share of the cores
    const group = await currentClient().createActorGroup(MeshReplicaClass, n, () => [config, adamw, replica], {
      env: replicaThreadsEnv(n),
    })
    try {
      await group.waitReady()
      await Mesh.create(group, { data: mesh.data, model: mesh.model })
    } catch (err) {
      await group.shutdown()
      throw err
    }
    return new MeshEngine(group, mesh, fsdp, config, specs)
  }

  /** How REPLICA_FAILED names the engine and its members. */
  get #names(): MemberNames {
    return this.replicated ? { engine: 'data-parallel', member: 'replica' } : { engine: 'mesh', member: 'member' }
  }

  /** Awaits every call; when one fails, REPLICA_FAILED naming the members that are gone. */
  #all<T>(what: string, calls: Promise<T>[]): Promise<T[]> {
    return this.#failed.watch(this.group, calls, (c) => allMembers(this.group, this.size, this.#names, what, c))
  }

  /** Cuts full weights and moments into every member's parts and loads them. */
  async load(state: TrainTensors): Promise<void> {
    this.pids = await this.#all(
      'load',
      this.group.members.map((m, r) => m.load(toWire(cutForMember(state, this.layout, this.mesh, this.fsdp, r)))),
    )
  }

  /**
   * Every member reads its own parts of the sharded checkpoint `src` in the finestore at
   * `storeUrl` (whatever mesh wrote it), only from the stored members' files they lie in; this
   * process reads no tensor. What each member read is kept in {@link shardReads}.
   */
  async loadShards(storeUrl: string, src: StoredShards): Promise<void> {
    const got = await this.#all(
      'load',
      this.group.members.map((m) => m.loadShards(storeUrl, src)),
    )
    this.pids = got.map((g) => g.pid)
    this.shardReads = got.map(({ files, bytes }) => ({ files, bytes }))
  }

  async step(batch: Batch, lr: number): Promise<StepResult> {
    const per = batch.batchSize / this.mesh.data
    const denom = Math.max(1, maskCount(batch))
    const rows = Array.from({ length: this.mesh.data }, (_, d) => copyRows(batch, d * per, (d + 1) * per))
    const results = await this.#all(
      'step',
      this.group.members.map((m, r) => m.step(rows[coordsOfRank(this.mesh, r).data]!, denom, lr)),
    )
    return results[0]!
  }

  /** The first model group (data coordinate 0) evaluates together; under fsdp every member (weights are gathered). */
  async evalLoss(batch: Batch): Promise<number> {
    const group = this.fsdp ? this.group.members : this.group.members.slice(0, this.mesh.model)
    return (
      await this.#all(
        'eval',
        group.map((m) => m.evalLoss(batch)),
      )
    )[0]!
  }

  /** Every member's parts, in rank order. */
  async parts(): Promise<PartTensors[]> {
    return (
      await this.#all(
        'state',
        this.group.members.map((m) => m.state()),
      )
    ).map(fromWire)
  }

  /** Full weights and moments, joined from the members' parts. */
  async state(): Promise<TrainTensors> {
    const full = assembleMembers(await this.parts(), this.layout, this.mesh, this.fsdp)
    return { weights: new Map(full.weights), optimizer: new Map(full.optimizer), count: full.count }
  }

  /** Bytes of parameters + AdamW moments the member that owns most keeps (what `member.memory().ownedBytes` says). */
  ownedBytesPerMember(): number {
    return 12 * this.layout.reduce((a, lp) => a + lp.owned, 0)
  }

  /** How the members hold the parameters, as a sharded checkpoint records it. */
  checkpointLayout(): ShardedLayout {
    return {
      data: this.mesh.data,
      model: this.mesh.model,
      fsdp: this.fsdp,
      layout: this.layout,
      ownedWeights: this.fsdp,
    }
  }

  /** Every member writes its parts into the store at `storeUrl` at once; their blobs, in rank order. */
  async writeShards(storeUrl: string): Promise<ShardBlobs[]> {
    return this.#all(
      'checkpoint',
      this.group.members.map((m) => m.writeShard(storeUrl)),
    )
  }

  /**
   * Stops the members; one that failed a call (named in REPLICA_FAILED) is waited for a few seconds
   * at most, so a member behind a partition does not hold the close up (failed-members.ts).
   */
  async close(): Promise<void> {
    await this.#failed.stop(this.group)
  }
}
