/**
 * @module One data-parallel replica, run as a fray actor: it holds a copy of the model and the
 * optimizer, computes gradients on its slice of the global batch, all-reduces them over the mesh
 * (sum; each replica's loss is already divided by the global token count), and applies the update.
 * Every replica applies identical bits, so the copies never drift. The gradients are all-reduced
 * in buckets as the backward pass finishes them, while it computes the rest (`overlapReduce`).
 * Under a webgpu driver the replicas run on webgpu too: the gradients stay on the device until they
 * are concatenated there and read back as one flat buffer (one asynchronous read a step), and the
 * all-reduced sum goes back up once for AdamW on the device ({@link DeviceAdamW}).
 */
import * as tf from '@tensorflow/tfjs'
import { currentMesh } from '@marin/fray'
import { initBackend, isDeviceBackend } from '../backend.js'
import type { Batch } from '../data/batch.js'
import { evalLossOf } from '../engine.js'
import type { StepResult } from '../engine.js'
import { createModel, loadArchitecture } from '../models/lm.js'
import type { CausalLM } from '../models/lm.js'
import type { ModelConfig } from '../models/config.js'
import { AdamW } from '../optim/adamw.js'
import type { AdamWConfig } from '../optim/adamw.js'
import { DeviceAdamW } from '../optim/adamw-device.js'
import { batchTensors, computeGrads, computeGradsOnDevice, flattenGrads } from '../train-step.js'
import { streamGradients } from '../kernels/lean-backprop.js'
import { heapFloats } from '../kernels/wasm-heap.js'
import { maskedCrossEntropy, withAuxLoss } from '../loss.js'
import { fromWire, toWire } from './wire.js'
import type { WireTensors } from './wire.js'

/** Where one replica step's time went, in milliseconds of wall time, and the CPU time the process used (on a shared
 * machine, the work itself). */
export type StepPhases = {
  /** Forward and backward (with `overlapReduce`, the buckets' collectives interleaved). */
  readonly grads: number
  readonly flatten: number
  /** Waiting on the all-reduce after the backward pass. */
  readonly allReduce: number
  readonly apply: number
  readonly cpu: number
  /** All-reduces of the step's gradients, and how many of them started before the backward pass ended. */
  readonly buckets: number
  readonly bucketsDuringBackward: number
}

/** Host↔device traffic of one replica step on a device backend: bytes read back to the host (the flat gradient
 * and the loss, in one read), bytes uploaded (the batch slice and the summed gradient), and the number of reads. */
export type StepTransfer = { readonly toHost: number; readonly toDevice: number; readonly reads: number }

/** A step's phases, and on a device backend its traffic. */
export type StepRecord = StepPhases & { readonly transfer?: StepTransfer }

export type ReplicaOptions = {
  /** The module that registers the model's architecture, when it is not built in (models/registry.ts `module`). */
  readonly architectureModule?: string
  /**
   * All-reduce the gradients in buckets as the backward pass finishes them (true), or in one
   * collective after it (false). The same bits either way: the all-reduce adds each element in
   * rank order, whatever the buffer it is in. Microbatches other than 1 reduce after. @default true
   */
  readonly overlapReduce?: boolean
  /** Bytes of gradients per bucket (at least). @default 4 MiB */
  readonly bucketBytes?: number
  /** The backend the replica asks for: `webgpu` when the driver runs on webgpu (the replicas then keep the model,
   * gradients and AdamW on the device); @default LEVANTER_BACKEND, else the CPU order for synchronous reads */
  readonly backend?: 'webgpu'
}

const cpuMs = (): number => {
  const u = process.cpuUsage()
  return (u.user + u.system) / 1000
}

const KEEP_PHASES = 100

export class Replica {
  #model: CausalLM | undefined
  #opt: AdamW | DeviceAdamW | undefined
  readonly #phases: StepRecord[] = []
  #flat: Float32Array | undefined // the step's gradient buffer, reused: nothing holds it past the step

  constructor(
    readonly modelConfig: ModelConfig,
    readonly adamw: AdamWConfig,
    readonly microbatches: number,
    readonly opts: ReplicaOptions = {},
  ) {}

  /** Start the backend, build the model, take the driver's weights and optimizer state. */
  async load(wire: WireTensors): Promise<number> {
    const state = fromWire(wire)
    // the CPU path reads tensors synchronously: webgpu only when asked for, and then the device path
    if (this.opts.backend === 'webgpu') await initBackend('webgpu')
    else await initBackend(undefined, { syncReads: true })
    await loadArchitecture(this.modelConfig.type, this.opts.architectureModule)
    this.#model ??= createModel(this.modelConfig)
    this.#opt ??= isDeviceBackend() ? new DeviceAdamW(this.adamw, this.#model) : new AdamW(this.adamw, this.#model)
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
    const opt = this.#opt!
    if (opt instanceof DeviceAdamW) return this.#deviceStep(opt, slice, denominator, lr)
    if ((this.opts.overlapReduce ?? true) && this.microbatches === 1)
      return this.#overlappedStep(opt, slice, denominator, lr)
    const model = this.#model!
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
    this.#record({ grads: t1 - t0, flatten: t2 - t1, allReduce: t3 - t2, apply: t4 - t3, cpu: cpuMs() - c0 }, 1, 0)
    return { loss, gradNorm }
  }

  /**
   * {@link step} with the gradients all-reduced in buckets during the backward pass. The buffer is
   * the loss then the gradients in parameter order; each gradient is copied in as the pass
   * finishes it (the last layers' first), and each time the finished tail of the buffer holds a
   * bucket's worth not yet sent, that range is all-reduced in place while the pass goes on. Every
   * replica runs the same pass, so all start the same buckets in the same order. The loss and
   * what is left (the embeddings, finished last) go in one collective after the pass.
   */
  async #overlappedStep(opt: AdamW, slice: Batch, denominator: number, lr: number): Promise<StepResult> {
    const model = this.#model!,
      mesh = currentMesh()
    const vars = [...model.params.values()]
    const at: number[] = []
    let total = 1
    for (const v of vars) {
      at.push(total)
      total += v.size
    }
    const flat = this.#flat?.length === total ? this.#flat : (this.#flat = new Float32Array(total))
    const bucket = Math.max(1, (this.opts.bucketBytes ?? 4 * 2 ** 20) >> 2)
    const filled = new Uint8Array(vars.length)
    let frontier = vars.length, // parameters frontier… are in the buffer
      sent = total, // floats sent… are being reduced
      unsettled = 0,
      buckets = 0,
      during = 0,
      inPass = true
    const pending: Promise<unknown>[] = []
    const reduce = (lo: number, hi: number) => {
      const part = flat.subarray(lo, hi)
      unsettled++
      buckets++
      if (inPass) during++
      pending.push(mesh.allReduce(part, { op: 'sum', out: part }).finally(() => unsettled--))
    }
    const backend = tf.backend()
    const c0 = cpuMs(),
      t0 = performance.now()
    const { ids, targets, mask } = batchTensors(slice)
    let value: tf.Tensor
    try {
      value = await streamGradients(
        () => {
          const { logits, aux } = model.forwardTraining(ids)
          return withAuxLoss(maskedCrossEntropy(logits, targets, mask, denominator), aux, mask, denominator)
        },
        vars,
        (i, g) => {
          flat.set(heapFloats(g, backend) ?? (g.dataSync() as Float32Array), at[i]!)
          filled[i] = 1
          while (frontier > 0 && filled[frontier - 1]) frontier--
          const lo = frontier < vars.length ? at[frontier]! : total
          if (sent - lo >= bucket && frontier > 0) {
            reduce(lo, sent)
            sent = lo
          }
        },
        () => (unsettled > 0 ? new Promise<void>((r) => setImmediate(r)) : undefined),
      )
    } finally {
      tf.dispose([ids, targets, mask])
    }
    inPass = false
    flat[0] = (await value.data())[0]!
    value.dispose()
    const t1 = performance.now()
    reduce(0, sent)
    await Promise.all(pending)
    const t2 = performance.now()
    const gradNorm = opt.applyFlat(flat.subarray(1), lr)
    const t3 = performance.now()
    this.#record({ grads: t1 - t0, flatten: 0, allReduce: t2 - t1, apply: t3 - t2, cpu: cpuMs() - c0 }, buckets, during)
    return { loss: flat[0]!, gradNorm }
  }

  /**
   * {@link step} on a device backend: gradients and loss computed on the device, concatenated there
   * into one flat tensor (the gradients in parameter order, then the loss) and read back in one
   * asynchronous read; all-reduced as on the CPU path; the summed gradient uploaded as one tensor,
   * split on the device, and AdamW applied there. The gradient norm returned is the host's, from
   * the summed buffer (reading the device's would be a second read).
   */
  async #deviceStep(opt: DeviceAdamW, slice: Batch, denominator: number, lr: number): Promise<StepResult> {
    const model = this.#model!
    const c0 = cpuMs(),
      t0 = performance.now()
    const local = computeGradsOnDevice(model, slice, denominator, this.microbatches)
    const t1 = performance.now()
    const names = [...model.params.keys()]
    const joined = tf.tidy(() =>
      tf.concat([...names.map((k) => local.grads.get(k)!.reshape([-1])), local.loss.reshape([1])]),
    )
    tf.dispose([...local.grads.values(), local.loss])
    let flat: Float32Array
    try {
      flat = (await joined.data()) as Float32Array
    } finally {
      joined.dispose()
    }
    const toHost = flat.byteLength
    const t2 = performance.now()
    await currentMesh().allReduce(flat, { op: 'sum', out: flat })
    const t3 = performance.now()
    const n = flat.length - 1
    const loss = flat[n]!
    let sq = 0
    for (let i = 0; i < n; i++) sq += flat[i]! * flat[i]!
    const parts = tf.tidy(() =>
      tf
        .split(
          tf.tensor1d(flat.subarray(0, n)),
          names.map((k) => model.params.get(k)!.size),
        )
        .map((g, i) => g.reshape(model.params.get(names[i]!)!.shape)),
    )
    const grads = new Map(names.map((k, i) => [k, parts[i]!]))
    try {
      opt.apply(grads, lr).dispose()
    } finally {
      tf.dispose([...grads.values()])
    }
    const t4 = performance.now()
    this.#record({ grads: t1 - t0, flatten: t2 - t1, allReduce: t3 - t2, apply: t4 - t3, cpu: cpuMs() - c0 }, 1, 0, {
      transfer: { toHost, toDevice: local.bytesToDevice + 4 * n, reads: 1 },
    })
    return { loss, gradNorm: Math.sqrt(sq) }
  }

  #record(
    p: Omit<StepPhases, 'buckets' | 'bucketsDuringBackward'>,
    buckets: number,
    during: number,
    moved: { transfer?: StepTransfer } = {},
  ): void {
    this.#phases.push({ ...p, buckets, bucketsDuringBackward: during, ...moved })
    if (this.#phases.length > KEEP_PHASES) this.#phases.shift()
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

  /** The backend this replica computes on. */
  backend(): string {
    return tf.getBackend()
  }

  /** The phases of this replica's latest steps (up to 100), oldest first. */
  phases(): StepRecord[] {
    return [...this.#phases]
  }

  /** Live tensors in this replica (leak checks) and its peak resident memory. */
  memory(): { numTensors: number; numBytes: number; peakRssMiB: number } {
    const m = tf.memory()
    return { numTensors: m.numTensors, numBytes: m.numBytes, peakRssMiB: process.resourceUsage().maxRSS / 1024 }
  }
}
