/**
 * @module One member of a `{ data, model }` training mesh, run as a fray actor.
 *
 * It holds its part of every parameter over the model axis (layout.ts), computes gradients on its
 * rows of the global batch (stage by stage with the other model members when `model` > 1,
 * tensor-parallel.ts), sums the parts of replicated parameters over `model`, then over `data`
 * either all-reduces the gradients (replicated) or reduce-scatters them (fsdp: the member keeps only
 * the shard it owns), clips by the global norm (one small all-reduce over every axis), steps AdamW
 * on what it owns and, under fsdp, all-gathers the updated shards back into its parameters. A
 * member that holds the whole model (model 1, not fsdp: plain data parallel) steps as
 * replicated-step.ts says: buckets all-reduced during the backward pass, and on a device one read
 * of the gradient a step and AdamW on the device.
 */
import * as tf from '@tensorflow/tfjs'
import { openStore } from '@marin/finestore'
import type { BlobInfo, Store } from '@marin/finestore'
import { currentMesh } from '@marin/fray'
import { withMatmulPrecision } from '../kernels/native-gemm.js'
import { initBackend } from '../backend.js'
import type { BackendInfo } from '../backend.js'
import type { Batch } from '../data/batch.js'
import { evalLossOf } from '../engine.js'
import type { StepResult } from '../engine.js'
import { createModel, loadArchitecture, specsOf } from '../models/lm.js'
import type { CausalLM } from '../models/lm.js'
import type { ModelConfig } from '../models/config.js'
import type { AdamWConfig } from '../optim/adamw.js'
import { adamwStep, clipScale, squaredNorm, updateOnHost } from '../optim/adamw-op.js'
import { computeGradsOnDevice } from '../train-step.js'
import { LevanterError } from '../errors.js'
import { fsdpShard, initialPart, joinFsdpShards, localParams, shardCopies } from './layout.js'
import type { LocalParam, MeshShape } from './layout.js'
import { shardFile } from '../checkpoint/checkpointer.js'
import type { ShardSource } from '../checkpoint/checkpointer.js'
import { decodeSafetensors, encodeSafetensors } from '../checkpoint/safetensors.js'
import {
  heldWeights,
  readGrads,
  stagesOf,
  sumInto,
  tensorParallelGrads,
  tensorParallelLoss,
} from './tensor-parallel.js'
import type { GradSink, ModelAllReduce, Stages, StageWeights } from './tensor-parallel.js'
import { fromWire, toWire } from './wire.js'
import type { WireTensors } from './wire.js'
import { concat, split } from './flat.js'
import { ReplicatedStep } from './replicated-step.js'
import { cpuMs, NO_PHASES } from './step-record.js'
import type { StepRecord } from './step-record.js'

export type MeshReplicaOptions = {
  /** The module that registers the model's architecture, when it is not built in (models/registry.ts `module`). */
  readonly architectureModule?: string
  readonly mesh: MeshShape
  readonly fsdp: boolean
  readonly microbatches: number
  /**
   * Reduce the gradients over data during the backward pass (true), or all of them in one
   * collective after it (false: the baseline the bench compares with; the same bits). fsdp
   * reduce-scatters each stage's gradients as the pass produces them; a member holding the whole
   * model all-reduces them in buckets (replicated-step.ts). @default true
   */
  readonly overlapReduce?: boolean
  /** A member holding the whole model: bytes of gradients per bucket (at least). @default 4 MiB */
  readonly bucketBytes?: number
  /** The backend the member asks for: `webgpu` when the driver runs on webgpu; @default LEVANTER_BACKEND, else the
   * default order (backend.ts). A member reads tensors asynchronously wherever a read could be asynchronous only
   * (a replica of the whole model reads synchronously on the CPU backends alone), so any backend runs it. */
  readonly backend?: 'webgpu'
  /** The products' operands in this member's steps and evaluations (the trainer's `precision`: bf16 on the native
   * bf16 GEMM, set around each call: kernels/native-gemm.ts `withMatmulPrecision`). @default 'fp32' */
  readonly precision?: 'fp32' | 'bf16'
}

/** What a member holds and loads: its model part of each parameter (whole over data) and its owned moments. */
export type MemberParts = {
  /** Model parts by parameter name (the local shapes). */
  readonly weights: ReadonlyMap<string, Float32Array>
  /** `m.<name>`, `v.<name>`: the owned slices (fsdp shards, else the model parts). */
  readonly optimizer: ReadonlyMap<string, Float32Array>
  readonly count: number
}

const KEEP_PHASES = 100

export class MeshReplica {
  #params = new Map<string, tf.Variable>()
  #model: CausalLM | undefined // model axis of 1: the whole model, so the plain gradient pass runs
  #stages: Stages | undefined
  #layout: LocalParam[] = []
  #coords = { data: 0, model: 0 }
  #p = new Map<string, Float32Array>()
  #m = new Map<string, Float32Array>()
  #v = new Map<string, Float32Array>()
  #count = 0
  readonly #phases: StepRecord[] = []
  /** The whole model's step (model 1, not fsdp); it holds the optimizer state then. */
  #whole: ReplicatedStep | undefined
  #store: { url: string; store: Store } | undefined
  #stageReduceMs = 0
  /** fsdp over more than one member: weights are gathered stage by stage, never held whole. */
  #gathered = false
  #index = new Map<string, number>()

  constructor(
    readonly modelConfig: ModelConfig,
    readonly adamw: AdamWConfig,
    readonly opts: MeshReplicaOptions,
  ) {}

  /** Backend, coordinates, layout and the stages, once. */
  async #setup(): Promise<void> {
    await initBackend(this.opts.backend) // reads on a device are asynchronous: webgpu runs a member too
    const c = currentMesh().coords()
    this.#coords = { data: c.data ?? 0, model: c.model ?? 0 }
    if (this.#layout.length) return
    const { mesh: shape, fsdp } = this.opts
    await loadArchitecture(this.modelConfig.type, this.opts.architectureModule)
    this.#layout = localParams(this.modelConfig, specsOf(this.modelConfig), shape, fsdp)
    this.#layout.forEach((lp, i) => this.#index.set(lp.name, i))
    this.#gathered = fsdp && shape.data > 1
    if (shape.model === 1 && !fsdp) {
      const { microbatches, overlapReduce, bucketBytes } = this.opts
      this.#model = createModel(this.modelConfig)
      this.#whole = new ReplicatedStep(this.#model, this.adamw, { microbatches, overlapReduce, bucketBytes })
    } else if (shape.model === 1 && !this.#gathered) this.#model = createModel(this.modelConfig)
    else this.#stages = stagesOf(this.modelConfig, shape.model, this.#coords.model === 0)
  }

  /** Takes this member's parts of the weights and its owned moments (zeros where absent). Returns the process id. */
  async load(wire: WireTensors): Promise<number> {
    const state = fromWire(wire)
    await this.#setup()
    this.#take(state.weights, state.optimizer, state.count, false)
    return process.pid
  }

  /**
   * Holds `weights` (model parts, or with `owned` this member's fsdp shards of them) and the owned
   * moments of `optimizer` (zeros where absent), copied.
   */
  #take(
    weights: ReadonlyMap<string, Float32Array>,
    optimizer: ReadonlyMap<string, Float32Array>,
    count: number,
    owned: boolean,
  ): void {
    const { mesh: shape, fsdp } = this.opts
    for (const lp of this.#layout) {
      const w = weights.get(lp.name)
      const want = owned ? lp.owned : lp.size
      if (w?.length !== want)
        throw new LevanterError(
          'BAD_SHAPE',
          `mesh member ${currentMesh().rank}: parameter "${lp.name}" got ${w?.length ?? 0} values, expected ${want}`,
        )
      if (!this.#gathered) this.#setParam(lp, w)
      if (this.#whole) continue // its optimizer holds the moments
      this.#p.set(lp.name, fsdp && !owned ? fsdpShard(w, shape.data, this.#coords.data) : w.slice())
      this.#m.set(lp.name, optimizer.get(`m.${lp.name}`)?.slice() ?? new Float32Array(lp.owned))
      this.#v.set(lp.name, optimizer.get(`v.${lp.name}`)?.slice() ?? new Float32Array(lp.owned))
    }
    if (this.#whole) this.#wholeMoments(optimizer, count)
    else this.#count = count
  }

  /** The whole model's moments into its optimizer (copied; zeros where absent), and the update count. */
  #wholeMoments(optimizer: ReadonlyMap<string, Float32Array>, count: number): void {
    const full = new Map<string, Float32Array>()
    for (const lp of this.#layout)
      for (const k of [`m.${lp.name}`, `v.${lp.name}`]) full.set(k, optimizer.get(k) ?? new Float32Array(lp.owned))
    this.#whole!.opt.load(full, count)
  }

  async #openStore(storeUrl: string): Promise<Store> {
    if (this.#store?.url !== storeUrl) {
      this.#store?.store.close()
      this.#store = { url: storeUrl, store: await openStore({ url: storeUrl }) }
    }
    return this.#store.store
  }

  /**
   * Loads this member's parts straight from a sharded checkpoint in the finestore at `storeUrl`,
   * whatever mesh wrote it: it reads only the stored members' files its parts lie in
   * (layout.ts's `shardCopies`) and cuts its parts from them; no full tensor is joined anywhere.
   * Returns the process id and the files it read with their bytes.
   */
  async loadShards(storeUrl: string, src: ShardSource): Promise<{ pid: number; files: string[]; bytes: number }> {
    await this.#setup()
    const rank = currentMesh().rank
    const { weights, optimizer, copies } = shardCopies(
      src.mesh,
      this.#layout,
      this.opts.mesh,
      this.opts.fsdp,
      rank,
      this.#gathered,
    )
    const view = await (await this.#openStore(storeUrl)).open(src.ref)
    const members = src.mesh.data * src.mesh.model
    const files = new Map<string, Map<string, Float32Array>>()
    let bytes = 0
    for (const c of copies) {
      const f = shardFile(/^[mv]\./.test(c.key) ? 'optimizer' : 'model', c.rank, members)
      if (!files.has(f)) {
        const path = `${src.dir}/${f}`
        const raw = await view.read(path)
        bytes += raw.byteLength
        const { tensors } = decodeSafetensors(raw, `${src.ref} ${path}`)
        files.set(f, new Map([...tensors].map(([k, t]) => [k, t.data as Float32Array])))
      }
      const from = files.get(f)!.get(c.key)
      if (!from || from.length < c.from + c.length)
        throw new LevanterError(
          'BAD_CHECKPOINT',
          `${src.ref} ${src.dir}/${f}: "${c.key}" is missing or not the size the manifest's layout records`,
        )
      c.to.set(from.subarray(c.from, c.from + c.length), c.at)
    }
    this.#take(weights, optimizer, src.count, this.#gathered)
    return { pid: process.pid, files: [...files.keys()], bytes }
  }

  /**
   * Draws this member's parts of the initial weights from `seed` (the values `createModel(config,
   * seed)` holds), only where it needs them: under fsdp its owned shards, so no process holds a
   * whole parameter. Fresh moments. Returns the process id.
   */
  async init(seed: number): Promise<number> {
    await this.#setup()
    const rank = currentMesh().rank,
      specs = specsOf(this.modelConfig)
    const { mesh: shape, fsdp } = this.opts
    this.#layout.forEach((lp, i) => {
      const part = initialPart(specs[i]!, lp, shape, rank, seed, this.#gathered)
      if (!this.#gathered) this.#setParam(lp, part)
      if (this.#whole) return
      this.#p.set(lp.name, !this.#gathered && fsdp ? fsdpShard(part, shape.data, this.#coords.data) : part)
      this.#m.set(lp.name, new Float32Array(lp.owned))
      this.#v.set(lp.name, new Float32Array(lp.owned))
    })
    if (this.#whole) this.#wholeMoments(new Map(), 0)
    else this.#count = 0
    return process.pid
  }

  #setParam(lp: LocalParam, data: Float32Array): void {
    if (this.#model) {
      this.#model.set(lp.name, data)
      this.#params.set(lp.name, this.#model.params.get(lp.name)!)
      return
    }
    const t = tf.tensor(data, [...lp.local])
    const old = this.#params.get(lp.name)
    if (old) old.assign(t)
    else this.#params.set(lp.name, tf.variable(t, true))
    t.dispose()
  }

  /** Gradients of this member's rows, by name (the model parts). */
  async #grads(slice: Batch, denominator: number): Promise<{ loss: number; grads: Map<string, Float32Array> }> {
    if (this.#model) {
      const r = computeGradsOnDevice(this.#model, slice, denominator, this.opts.microbatches)
      const grads = new Map<string, Float32Array>()
      const names = [...r.grads.keys()]
      const [values, [loss]] = await Promise.all([readGrads([...r.grads.values()]), readGrads([r.loss])])
      names.forEach((n, i) => grads.set(n, values[i]!))
      return { loss: loss![0]!, grads }
    }
    const grads = new Map<string, Float32Array>()
    const w = heldWeights(this.#params)
    const mb = this.opts.microbatches
    const loss = await tensorParallelGrads(
      this.#stages!,
      w,
      slice,
      denominator,
      mb,
      this.#modelAllReduce(),
      sumInto(grads),
    )
    return { loss, grads }
  }

  /** Sums over the model axis between stages (timed); null without a model axis. */
  #modelAllReduce(): ModelAllReduce | null {
    if (this.opts.mesh.model === 1) return null
    const mesh = currentMesh()
    return async (x) => {
      const t = performance.now()
      const sum = await mesh.allReduce(x, { axis: 'model' })
      this.#stageReduceMs += performance.now() - t
      return sum
    }
  }

  /** fsdp: a stage's weights all-gathered over data from the owned shards, dropped after the stage. */
  #gatheredWeights(): StageWeights {
    const mesh = currentMesh(),
      data = this.opts.mesh.data
    return {
      acquire: async (names) => {
        const lps = names.map((n) => this.#layout[this.#index.get(n)!]!)
        const per = lps.reduce((a, lp) => a + lp.owned, 0)
        const full = await mesh.allGather(concat(lps.map((lp) => this.#p.get(lp.name)!)), { axis: 'data' })
        let o = 0
        return lps.map((lp) => {
          const shards = Array.from({ length: data }, (_, s) => full.subarray(s * per + o, s * per + o + lp.owned))
          o += lp.owned
          return tf.tensor(joinFsdpShards(shards, lp.size), [...lp.local])
        })
      },
      release: (ws) => tf.dispose(ws),
    }
  }

  /**
   * fsdp: the loss, and this member's shard of every gradient summed over data. Each stage's
   * gradients are reduce-scattered as soon as its backward pass produces them, while the next
   * stage computes; only the owned shards accumulate.
   */
  async #shardedGrads(
    slice: Batch,
    denominator: number,
  ): Promise<{ loss: number; owned: Float32Array[]; buckets: number; during: number }> {
    const mesh = currentMesh(),
      data = this.opts.mesh.data
    const owned = this.#layout.map((lp) => new Float32Array(lp.owned))
    const pending: Promise<void>[] = []
    const held: [number[], Float32Array[]][] = []
    const scatter = (ids: number[], values: Float32Array[]) => {
      const per = ids.reduce((a, i) => a + this.#layout[i]!.owned, 0)
      const flat = new Float32Array(per * data)
      let o = 0
      for (let s = 0; s < data; s++)
        ids.forEach((i, k) => {
          const L = this.#layout[i]!.owned,
            v = values[k]!
          flat.set(v.subarray(Math.min(v.length, s * L), Math.min(v.length, (s + 1) * L)), o) // zero-padded
          o += L
        })
      pending.push(
        mesh.reduceScatter(flat, { axis: 'data' }).then((shard) => {
          let at = 0
          for (const i of ids) {
            const acc = owned[i]!
            for (let j = 0; j < acc.length; j++) acc[j]! += shard[at + j]!
            at += acc.length
          }
        }),
      )
    }
    const overlap = this.opts.overlapReduce ?? true
    const sink: GradSink = async (names, gs) => {
      const ids = names.map((n) => this.#index.get(n)!)
      const values = await readGrads(gs) // copies off the backend
      if (overlap) scatter(ids, values)
      else held.push([ids, values])
    }
    const w = this.#gatheredWeights()
    const mb = this.opts.microbatches
    const loss = await tensorParallelGrads(this.#stages!, w, slice, denominator, mb, this.#modelAllReduce(), sink)
    if (!overlap)
      scatter(
        held.flatMap(([ids]) => ids),
        held.flatMap(([, values]) => values),
      )
    await Promise.all(pending)
    return { loss, owned, buckets: pending.length, during: overlap ? pending.length : 0 }
  }

  /** One step on this member's rows of the global batch; returns the global loss and gradient norm. */
  step(slice: Batch, denominator: number, lr: number): Promise<StepResult> {
    return withMatmulPrecision(this.opts.precision ?? 'fp32', () => this.#step(slice, denominator, lr))
  }

  async #step(slice: Batch, denominator: number, lr: number): Promise<StepResult> {
    if (this.#whole) {
      const { result, record } = await this.#whole.step(slice, denominator, lr)
      this.#record(record)
      return result
    }
    const mesh = currentMesh()
    const { mesh: shape, fsdp } = this.opts
    const c0 = cpuMs(),
      t0 = performance.now()
    this.#stageReduceMs = 0
    let loss: number, owned: Float32Array[], t1: number, t2: number
    let buckets = shape.data > 1 ? 1 : 0,
      during = 0
    // Replicated parameters inside split stages: the parts add up over the model axis.
    const partial = this.#layout.filter((lp) => lp.partial)
    const sumPartial = async (of: (lp: LocalParam) => Float32Array, len: (lp: LocalParam) => number) =>
      partial.length ? split(await mesh.allReduce(concat(partial.map(of)), { axis: 'model' }), partial, len) : []
    if (this.#gathered) {
      // Reduce-scattered over data during the backward pass already.
      ;({ loss, owned, buckets, during } = await this.#shardedGrads(slice, denominator))
      t1 = performance.now()
      const sums = await sumPartial(
        (lp) => owned[this.#index.get(lp.name)!]!,
        (lp) => lp.owned,
      )
      partial.forEach((lp, k) => (owned[this.#index.get(lp.name)!] = sums[k]!))
      t2 = performance.now()
    } else {
      const r = await this.#grads(slice, denominator)
      loss = r.loss
      const grads = r.grads
      t1 = performance.now()
      const sums = await sumPartial(
        (lp) => grads.get(lp.name)!,
        (lp) => lp.size,
      )
      partial.forEach((lp, k) => grads.set(lp.name, sums[k]!))
      t2 = performance.now()
      // Over data: the sum of every gradient (fsdp over one member owns everything).
      if (shape.data === 1) owned = this.#layout.map((lp) => grads.get(lp.name)!)
      else {
        const flat = concat(this.#layout.map((lp) => grads.get(lp.name)!))
        owned = split(await mesh.allReduce(flat, { axis: 'data', out: flat }), this.#layout, (lp) => lp.size)
      }
    }
    const t3 = performance.now()
    // Global norm and loss: each distinct value counted once over the mesh.
    let sq = 0
    this.#layout.forEach((lp, i) => {
      const distinctOverModel = lp.split.kind !== 'replicated' || this.#coords.model === 0
      const distinctOverData = fsdp || this.#coords.data === 0
      if (distinctOverModel && distinctOverData) sq += squaredNorm(owned[i]!)
    })
    const totals = await mesh.allReduce(Float32Array.of(this.#coords.model === 0 ? loss : 0, sq))
    const norm = Math.sqrt(totals[1]!)
    const t4 = performance.now()
    this.#apply(owned, norm, lr)
    const t5 = performance.now()
    // fsdp gathers the updated shards stage by stage in the next pass.
    if (!this.#gathered) for (const lp of this.#layout) this.#setParam(lp, this.#p.get(lp.name)!)
    const t6 = performance.now()
    this.#record({
      ...NO_PHASES,
      grads: t1 - t0,
      stageReduce: this.#stageReduceMs,
      modelReduce: t2 - t1,
      dataReduce: t3 - t2,
      norm: t4 - t3,
      apply: t5 - t4,
      gather: t6 - t5,
      cpu: cpuMs() - c0,
      buckets,
      bucketsDuringBackward: during,
    })
    return { loss: totals[0]!, gradNorm: norm }
  }

  #record(r: StepRecord): void {
    this.#phases.push(r)
    if (this.#phases.length > KEEP_PHASES) this.#phases.shift()
  }

  /** The AdamW op (optim/adamw-op.ts) on the owned slices, the gradient clipped by the global norm (as `AdamW`). */
  #apply(grads: Float32Array[], norm: number, lr: number): void {
    const scale = clipScale(this.adamw, norm)
    const step = adamwStep(this.adamw, ++this.#count, lr)
    this.#layout.forEach((lp, i) => {
      const p = this.#p.get(lp.name)!
      updateOnHost(step, scale, lp.decay, grads[i]!, this.#m.get(lp.name)!, this.#v.get(lp.name)!, p, p)
    })
  }

  /**
   * Mean masked loss of `batch`; with a model axis every member of this member's model group calls
   * it, under fsdp every member.
   */
  evalLoss(batch: Batch): Promise<number> {
    return withMatmulPrecision(this.opts.precision ?? 'fp32', async () => {
      if (this.#model) return evalLossOf(this.#model, batch)
      const w = this.#gathered ? this.#gatheredWeights() : heldWeights(this.#params)
      return tensorParallelLoss(this.#stages!, w, batch, this.#modelAllReduce())
    })
  }

  /** This member's parts of the weights and its owned moments (what it would checkpoint). */
  async state(): Promise<WireTensors> {
    return toWire(await this.#parts())
  }

  /** Under fsdp every member calls it (the weights are gathered over data). */
  async #parts(): Promise<MemberParts> {
    const weights = new Map<string, Float32Array>()
    const optimizer = new Map<string, Float32Array>()
    const gathered = this.#gathered
      ? await this.#gatheredWeights().acquire(this.#layout.map((lp) => lp.name))
      : undefined
    for (const [i, lp] of this.#layout.entries()) {
      const t = gathered ? gathered[i]! : this.#params.get(lp.name)!
      weights.set(lp.name, ((await t.data()) as Float32Array).slice()) // cpu may hand over the tensor's own storage
      if (this.#whole) continue
      optimizer.set(`m.${lp.name}`, this.#m.get(lp.name)!.slice())
      optimizer.set(`v.${lp.name}`, this.#v.get(lp.name)!.slice())
    }
    if (gathered) tf.dispose(gathered)
    // the whole model's optimizer holds its moments (copies)
    if (this.#whole) return { weights, optimizer: await this.#whole.opt.state(), count: this.#whole.opt.count }
    return { weights, optimizer, count: this.#count }
  }

  /** fsdp: the shards of the weights and the moments this member owns, no collective. */
  #owned(): MemberParts {
    const optimizer = new Map<string, Float32Array>()
    for (const lp of this.#layout) {
      optimizer.set(`m.${lp.name}`, this.#m.get(lp.name)!)
      optimizer.set(`v.${lp.name}`, this.#v.get(lp.name)!)
    }
    return { weights: this.#p, optimizer, count: this.#count }
  }

  /**
   * Writes this member's parts as two loose blobs into the finestore at `storeUrl` (the driver
   * commits them into the checkpoint's version): its model parts in their local shapes (under fsdp
   * its owned shards of them, flat), and its owned moments.
   */
  async writeShard(storeUrl: string): Promise<{ model: BlobInfo; optimizer: BlobInfo; count: number }> {
    const store = await this.#openStore(storeUrl)
    const st = this.opts.fsdp ? this.#owned() : await this.#parts()
    const byLayout = (
      m: ReadonlyMap<string, Float32Array>,
      key: (n: string) => string,
      shape: (lp: LocalParam) => number[],
    ) => new Map(this.#layout.map((lp) => [key(lp.name), { shape: shape(lp), data: m.get(key(lp.name))! }]))
    const weights = byLayout(
      st.weights,
      (n) => n,
      (lp) => (this.opts.fsdp ? [lp.owned] : [...lp.local]),
    )
    const moments = new Map([
      ...byLayout(
        st.optimizer,
        (n) => `m.${n}`,
        (lp) => [lp.owned],
      ),
      ...byLayout(
        st.optimizer,
        (n) => `v.${n}`,
        (lp) => [lp.owned],
      ),
    ])
    const [model, optimizer] = await Promise.all([
      store.putBlob(encodeSafetensors(weights)),
      store.putBlob(encodeSafetensors(moments)),
    ])
    return { model, optimizer, count: st.count }
  }

  /**
   * Bytes this member keeps between steps: `ownedBytes`, the parameters it owns and their AdamW
   * moments (under fsdp 1/data of its model part); `heldBytes`, parameters it holds as tensors
   * between steps (none under fsdp over several members: each stage's weights are gathered for the
   * stage and dropped after it); `heapBytes`, the size the wasm heap grew to (0 off wasm).
   */
  memory(): { ownedBytes: number; heldBytes: number; heapBytes: number; peakRssMiB: number; numTensors: number } {
    const owned = this.#layout.reduce((a, lp) => a + lp.owned, 0)
    let held = 0
    for (const v of this.#params.values()) held += 4 * v.size
    const wasm = (tf.backend() as { wasm?: { HEAPF32: Float32Array } }).wasm
    return {
      ownedBytes: 3 * 4 * owned,
      heldBytes: held,
      heapBytes: wasm?.HEAPF32.byteLength ?? 0,
      peakRssMiB: process.resourceUsage().maxRSS / 1024,
      numTensors: tf.memory().numTensors,
    }
  }

  /** The backend this member computes on. */
  backend(): string {
    return tf.getBackend()
  }

  /** The backend this member chose, with its GPU adapter on webgpu (a device check compares it with the driver's). */
  backendInfo(): Promise<BackendInfo> {
    return initBackend(this.opts.backend)
  }

  /** The records of this member's latest steps (up to 100), oldest first. */
  phases(): StepRecord[] {
    return [...this.#phases]
  }
}
