/**
 * @module One member of a `{ data, model }` training mesh, run as a fray actor.
 *
 * It holds its part of every parameter over the model axis (layout.ts), computes gradients on its
 * rows of the global batch (stage by stage with the other model members when `model` > 1,
 * tensor-parallel.ts), sums the parts of replicated parameters over `model`, then over `data`
 * either all-reduces the gradients (replicated) or reduce-scatters them (fsdp: the member keeps only
 * the shard it owns), clips by the global norm (one small all-reduce over every axis), steps AdamW
 * on what it owns and, under fsdp, all-gathers the updated shards back into its parameters.
 */
import * as tf from '@tensorflow/tfjs'
import { openStore } from '@marin/finestore'
import type { BlobInfo, Store } from '@marin/finestore'
import { currentMesh } from '@marin/fray'
import { initBackend } from '../backend.js'
import { encodeSafetensors } from '../checkpoint/safetensors.js'
import type { Batch } from '../data/batch.js'
import { evalLossOf } from '../engine.js'
import type { StepResult } from '../engine.js'
import { createModel } from '../models/lm.js'
import type { CausalLM } from '../models/lm.js'
import type { ModelConfig } from '../models/config.js'
import { adamwUpdate, sumSquares } from '../optim/adamw.js'
import type { AdamWConfig } from '../optim/adamw.js'
import { computeGrads } from '../train-step.js'
import { LevanterError } from '../errors.js'
import { fsdpShard, joinFsdpShards, localParams } from './layout.js'
import type { LocalParam, MeshShape } from './layout.js'
import { stagesOf, tensorParallelGrads, tensorParallelLoss } from './tensor-parallel.js'
import { fromWire, toWire } from './wire.js'
import type { WireTensors } from './wire.js'
import type { Stages } from './tensor-parallel.js'

export type MeshReplicaOptions = { readonly mesh: MeshShape; readonly fsdp: boolean; readonly microbatches: number }

/** What a member holds and loads: its model part of each parameter (whole over data) and its owned moments. */
export type MemberParts = {
  /** Model parts by parameter name (the local shapes). */
  readonly weights: ReadonlyMap<string, Float32Array>
  /** `m.<name>`, `v.<name>`: the owned slices (fsdp shards, else the model parts). */
  readonly optimizer: ReadonlyMap<string, Float32Array>
  readonly count: number
}

/** Where one step's time went (ms). */
export type MeshStepPhases = {
  /** Forward and backward, the model-axis all-reduces between stages included. */
  readonly grads: number
  /** Of `grads`: waiting on the model-axis all-reduces between stages. */
  readonly stageReduce: number
  readonly modelReduce: number
  readonly dataReduce: number
  readonly norm: number
  readonly apply: number
  readonly gather: number
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
  readonly #phases: MeshStepPhases[] = []
  #store: { url: string; store: Store } | undefined
  #stageReduceMs = 0

  constructor(
    readonly modelConfig: ModelConfig,
    readonly adamw: AdamWConfig,
    readonly opts: MeshReplicaOptions,
  ) {}

  /** Takes this member's parts of the weights and its owned moments (zeros where absent). Returns the process id. */
  async load(wire: WireTensors): Promise<number> {
    const state = fromWire(wire)
    await initBackend()
    const c = currentMesh().coords()
    this.#coords = { data: c.data ?? 0, model: c.model ?? 0 }
    const { mesh: shape, fsdp } = this.opts
    if (!this.#layout.length) {
      const probe = createModel(this.modelConfig)
      this.#layout = localParams(this.modelConfig, probe.specs, shape, fsdp)
      if (shape.model === 1) this.#model = probe
      else {
        probe.dispose()
        this.#stages = stagesOf(this.modelConfig, shape.model, this.#coords.model === 0)
      }
    }
    for (const lp of this.#layout) {
      const w = state.weights.get(lp.name)
      if (w?.length !== lp.size)
        throw new LevanterError(
          'BAD_SHAPE',
          `mesh member ${currentMesh().rank}: parameter "${lp.name}" got ${w?.length ?? 0} values, expected ${lp.size}`,
        )
      this.#setParam(lp, w)
      this.#p.set(lp.name, fsdp ? fsdpShard(w, shape.data, this.#coords.data) : w.slice())
      this.#m.set(lp.name, state.optimizer.get(`m.${lp.name}`)?.slice() ?? new Float32Array(lp.owned))
      this.#v.set(lp.name, state.optimizer.get(`v.${lp.name}`)?.slice() ?? new Float32Array(lp.owned))
    }
    this.#count = state.count
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
      const r = computeGrads(this.#model, slice, denominator, this.opts.microbatches)
      const grads = new Map<string, Float32Array>()
      for (const [n, g] of r.grads) grads.set(n, g.dataSync() as Float32Array)
      tf.dispose([...r.grads.values()])
      return { loss: r.loss, grads }
    }
    const mesh = currentMesh()
    return tensorParallelGrads(this.#stages!, this.#params, slice, denominator, this.opts.microbatches, async (x) => {
      const t = performance.now()
      const sum = await mesh.allReduce(x, { axis: 'model' })
      this.#stageReduceMs += performance.now() - t
      return sum
    })
  }

  /** One step on this member's rows of the global batch; returns the global loss and gradient norm. */
  async step(slice: Batch, denominator: number, lr: number): Promise<StepResult> {
    const mesh = currentMesh()
    const { mesh: shape, fsdp } = this.opts
    const t0 = performance.now()
    this.#stageReduceMs = 0
    const { loss, grads } = await this.#grads(slice, denominator)
    const t1 = performance.now()
    // Replicated parameters inside split stages: the parts add up over the model axis.
    const partial = this.#layout.filter((lp) => lp.partial)
    if (partial.length) {
      const sum = await mesh.allReduce(concat(partial.map((lp) => grads.get(lp.name)!)), { axis: 'model' })
      split(sum, partial, (lp) => lp.size).forEach((g, i) => grads.set(partial[i]!.name, g))
    }
    const t2 = performance.now()
    // Over data: the sum (replicated) or this member's shard of it (fsdp), shard-major so each member's
    // range holds its shard of every parameter.
    let owned: Float32Array[]
    if (shape.data === 1) owned = this.#layout.map((lp) => grads.get(lp.name)!)
    else if (!fsdp) {
      const flat = concat(this.#layout.map((lp) => grads.get(lp.name)!))
      owned = split(await mesh.allReduce(flat, { axis: 'data', out: flat }), this.#layout, (lp) => lp.size)
    } else {
      const per = this.#layout.reduce((a, lp) => a + lp.owned, 0)
      const flat = new Float32Array(per * shape.data)
      let o = 0
      for (let s = 0; s < shape.data; s++)
        for (const lp of this.#layout) {
          flat.set(fsdpShard(grads.get(lp.name)!, shape.data, s), o)
          o += lp.owned
        }
      owned = split(await mesh.reduceScatter(flat, { axis: 'data' }), this.#layout, (lp) => lp.owned)
    }
    const t3 = performance.now()
    // Global norm and loss: each distinct value counted once over the mesh.
    let sq = 0
    this.#layout.forEach((lp, i) => {
      const distinctOverModel = lp.split.kind !== 'replicated' || this.#coords.model === 0
      const distinctOverData = fsdp || this.#coords.data === 0
      if (distinctOverModel && distinctOverData) sq += sumSquares(owned[i]!)
    })
    const totals = await mesh.allReduce(Float32Array.of(this.#coords.model === 0 ? loss : 0, sq))
    const norm = Math.sqrt(totals[1]!)
    const t4 = performance.now()
    this.#apply(owned, norm, lr)
    const t5 = performance.now()
    if (fsdp && shape.data > 1) {
      const full = await mesh.allGather(concat(this.#layout.map((lp) => this.#p.get(lp.name)!)), { axis: 'data' })
      const per = this.#layout.reduce((a, lp) => a + lp.owned, 0)
      let o = 0
      for (const lp of this.#layout) {
        const shards = Array.from({ length: shape.data }, (_, s) => full.subarray(s * per + o, s * per + o + lp.owned))
        this.#setParam(lp, joinFsdpShards(shards, lp.size))
        o += lp.owned
      }
    } else for (const lp of this.#layout) this.#setParam(lp, this.#p.get(lp.name)!)
    const t6 = performance.now()
    this.#phases.push({
      grads: t1 - t0,
      stageReduce: this.#stageReduceMs,
      modelReduce: t2 - t1,
      dataReduce: t3 - t2,
      norm: t4 - t3,
      apply: t5 - t4,
      gather: t6 - t5,
    })
    if (this.#phases.length > KEEP_PHASES) this.#phases.shift()
    return { loss: totals[0]!, gradNorm: norm }
  }

  /** AdamW on the owned slices, with the gradient clipped by the global norm (as `AdamW` does). */
  #apply(grads: Float32Array[], norm: number, lr: number): void {
    const c = this.adamw
    const scale = c.maxGradNorm !== null && norm > c.maxGradNorm ? c.maxGradNorm / (norm + 1e-6) : 1
    this.#count++
    const bc1 = 1 - c.beta1 ** this.#count,
      bc2 = 1 - c.beta2 ** this.#count
    this.#layout.forEach((lp, i) => {
      const p = this.#p.get(lp.name)!
      const keep = 1 - lr * (lp.decay ? c.weightDecay : 0)
      adamwUpdate(
        grads[i]!,
        this.#m.get(lp.name)!,
        this.#v.get(lp.name)!,
        p,
        p,
        scale,
        c.beta1,
        1 - c.beta1,
        c.beta2,
        1 - c.beta2,
        keep,
        lr / bc1,
        1 / bc2,
        c.eps,
      )
    })
  }

  /** Mean masked loss of `batch`; with a model axis, every member of this member's model group calls it. */
  async evalLoss(batch: Batch): Promise<number> {
    if (this.#model) return evalLossOf(this.#model, batch)
    const mesh = currentMesh()
    return tensorParallelLoss(this.#stages!, this.#params, batch, (x) => mesh.allReduce(x, { axis: 'model' }))
  }

  /** This member's parts of the weights and its owned moments (what it would checkpoint). */
  async state(): Promise<WireTensors> {
    return toWire(this.#parts())
  }

  #parts(): MemberParts {
    const weights = new Map<string, Float32Array>()
    const optimizer = new Map<string, Float32Array>()
    for (const lp of this.#layout) {
      weights.set(lp.name, (this.#params.get(lp.name)!.dataSync() as Float32Array).slice())
      optimizer.set(`m.${lp.name}`, this.#m.get(lp.name)!.slice())
      optimizer.set(`v.${lp.name}`, this.#v.get(lp.name)!.slice())
    }
    return { weights, optimizer, count: this.#count }
  }

  /**
   * Writes this member's parts as two loose blobs into the finestore at `storeUrl` (the driver
   * commits them into the checkpoint's version): its model parts in their local shapes, and its
   * owned moments.
   */
  async writeShard(storeUrl: string): Promise<{ model: BlobInfo; optimizer: BlobInfo; count: number }> {
    if (this.#store?.url !== storeUrl) {
      this.#store?.store.close()
      this.#store = { url: storeUrl, store: await openStore({ url: storeUrl }) }
    }
    const store = this.#store.store
    const st = this.#parts()
    const byLayout = (
      m: ReadonlyMap<string, Float32Array>,
      key: (n: string) => string,
      shape: (lp: LocalParam) => number[],
    ) => new Map(this.#layout.map((lp) => [key(lp.name), { shape: shape(lp), data: m.get(key(lp.name))! }]))
    const weights = byLayout(
      st.weights,
      (n) => n,
      (lp) => [...lp.local],
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
   * Bytes this member keeps between steps: the parameters it owns and their AdamW moments (fsdp:
   * 1/data of its model part), and the bytes of the parameters it computes with (its model part).
   */
  memory(): { ownedBytes: number; computeBytes: number; peakRssMiB: number; numTensors: number } {
    const owned = this.#layout.reduce((a, lp) => a + lp.owned, 0)
    const local = this.#layout.reduce((a, lp) => a + lp.size, 0)
    return {
      ownedBytes: 3 * 4 * owned,
      computeBytes: 4 * local,
      peakRssMiB: process.resourceUsage().maxRSS / 1024,
      numTensors: tf.memory().numTensors,
    }
  }

  phases(): MeshStepPhases[] {
    return [...this.#phases]
  }
}

function concat(parts: readonly Float32Array[]): Float32Array {
  const out = new Float32Array(parts.reduce((a, p) => a + p.length, 0))
  let o = 0
  for (const p of parts) {
    out.set(p, o)
    o += p.length
  }
  return out
}

/** Consecutive views of `flat`, `len(item)` floats each. */
function split<T>(flat: Float32Array, items: readonly T[], len: (t: T) => number): Float32Array[] {
  let o = 0
  return items.map((t) => {
    const v = flat.subarray(o, o + len(t))
    o += len(t)
    return v
  })
}
