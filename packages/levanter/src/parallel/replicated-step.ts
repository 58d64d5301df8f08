/**
 * @module The step of a mesh member that holds the whole model (model axis 1, not fsdp): it
 * computes the gradients of its rows of the global batch, all-reduces them over `data` (sum; each
 * member's loss is already divided by the global token count) and applies AdamW to the model's own
 * tensors. Every member applies identical bits, so the copies never drift.
 *
 * The gradients travel as one flat buffer: the loss in one slot, then the gradients in parameter
 * order. On the CPU backends they are all-reduced in buckets as the backward pass finishes them,
 * while it computes the rest (`overlapReduce`), and the optimizer reads the sum straight from the
 * buffer. On a device backend they stay on the device until they are concatenated there and read
 * back as one buffer (one asynchronous read a step), and the sum goes back up once, for AdamW on
 * the device ({@link DeviceAdamW}).
 */
import * as tf from '@tensorflow/tfjs'
import { currentMesh } from '@marin/fray'
import { isDeviceBackend } from '../backend.js'
import type { Batch } from '../data/batch.js'
import type { StepResult } from '../engine.js'
import { streamGradients } from '../kernels/lean-backprop.js'
import { heapFloats } from '../kernels/wasm-heap.js'
import { maskedCrossEntropy, withAuxLoss } from '../loss.js'
import type { CausalLM } from '../models/lm.js'
import { AdamW } from '../optim/adamw.js'
import type { AdamWConfig } from '../optim/adamw.js'
import { DeviceAdamW } from '../optim/adamw-device.js'
import { batchTensors, computeGrads, computeGradsOnDevice, flattenGrads } from '../train-step.js'
import { cpuMs, NO_PHASES } from './step-record.js'
import type { StepRecord } from './step-record.js'

export type ReplicatedStepOptions = {
  readonly microbatches: number
  /**
   * All-reduce the gradients in buckets as the backward pass finishes them (true), or in one
   * collective after it (false). The same bits either way: the all-reduce adds each element in
   * rank order, whatever the buffer it is in. Microbatches other than 1, and a device backend,
   * reduce after. @default true
   */
  readonly overlapReduce?: boolean
  /** Bytes of gradients per bucket (at least). @default 4 MiB */
  readonly bucketBytes?: number
}

/** A member's step over the whole model: its result, and what the member records of it. */
export type Stepped = { readonly result: StepResult; readonly record: StepRecord }

export class ReplicatedStep {
  /** AdamW on the model's tensors: on the device where the backend is one, else over host arrays. */
  readonly opt: AdamW | DeviceAdamW
  #flat: Float32Array | undefined // the step's gradient buffer, reused: nothing holds it past the step

  /** Call once the member's backend is chosen: it picks the optimizer. */
  constructor(
    readonly model: CausalLM,
    adamw: AdamWConfig,
    readonly opts: ReplicatedStepOptions,
  ) {
    this.opt = isDeviceBackend() ? new DeviceAdamW(adamw, model) : new AdamW(adamw, model)
  }

  /** Gradients on `slice`, summed over `data`, then one AdamW step. The result is the global loss. */
  step(slice: Batch, denominator: number, lr: number): Promise<Stepped> {
    const opt = this.opt
    if (opt instanceof DeviceAdamW) return this.#deviceStep(opt, slice, denominator, lr)
    if ((this.opts.overlapReduce ?? true) && this.opts.microbatches === 1)
      return this.#overlappedStep(opt, slice, denominator, lr)
    return this.#reduceAfter(opt, slice, denominator, lr)
  }

  /** One all-reduce after the backward pass, the loss in the buffer's last slot. */
  async #reduceAfter(opt: AdamW, slice: Batch, denominator: number, lr: number): Promise<Stepped> {
    const model = this.model
    const names = [...model.params.keys()]
    const c0 = cpuMs(),
      t0 = performance.now()
    const local = computeGrads(model, slice, denominator, this.opts.microbatches)
    const t1 = performance.now()
    const flat = (this.#flat = flattenGrads(local.grads, names, 1, this.#flat))
    tf.dispose([...local.grads.values()])
    flat[flat.length - 1] = local.loss
    const t2 = performance.now()
    await currentMesh().allReduce(flat, { op: 'sum', axis: 'data', out: flat })
    const t3 = performance.now()
    const loss = flat[flat.length - 1]!
    const gradNorm = opt.applyFlat(flat.subarray(0, flat.length - 1), lr)
    const t4 = performance.now()
    const record = { grads: t1 - t0, flatten: t2 - t1, dataReduce: t3 - t2, apply: t4 - t3, cpu: cpuMs() - c0 }
    return { result: { loss, gradNorm }, record: { ...NO_PHASES, ...record, buckets: 1 } }
  }

  /**
   * The gradients all-reduced in buckets during the backward pass. The buffer is the loss then
   * the gradients in parameter order; each gradient is copied in as the pass finishes it (the last
   * layers' first), and each time the finished tail of the buffer holds a bucket's worth not yet
   * sent, that range is all-reduced in place while the pass goes on. Every member runs the same
   * pass, so all start the same buckets in the same order. The loss and what is left (the
   * embeddings, finished last) go in one collective after the pass.
   */
  async #overlappedStep(opt: AdamW, slice: Batch, denominator: number, lr: number): Promise<Stepped> {
    const model = this.model,
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
      pending.push(mesh.allReduce(part, { op: 'sum', axis: 'data', out: part }).finally(() => unsettled--))
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
    const record = { grads: t1 - t0, dataReduce: t2 - t1, apply: t3 - t2, cpu: cpuMs() - c0 }
    return {
      result: { loss: flat[0]!, gradNorm },
      record: { ...NO_PHASES, ...record, buckets, bucketsDuringBackward: during },
    }
  }

  /**
   * On a device backend: gradients and loss computed on the device, concatenated there into one
   * flat tensor (the gradients in parameter order, then the loss) and read back in one
   * asynchronous read; all-reduced as on the CPU; the sum uploaded as one tensor, split on the
   * device, and AdamW applied there. The gradient norm returned is the host's, from the summed
   * buffer (reading the device's would be a second read).
   */
  async #deviceStep(opt: DeviceAdamW, slice: Batch, denominator: number, lr: number): Promise<Stepped> {
    const model = this.model
    const c0 = cpuMs(),
      t0 = performance.now()
    const local = computeGradsOnDevice(model, slice, denominator, this.opts.microbatches)
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
    await currentMesh().allReduce(flat, { op: 'sum', axis: 'data', out: flat })
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
    const record = { grads: t1 - t0, flatten: t2 - t1, dataReduce: t3 - t2, apply: t4 - t3, cpu: cpuMs() - c0 }
    return {
      result: { loss, gradNorm: Math.sqrt(sq) },
      record: {
        ...NO_PHASES,
        ...record,
        buckets: 1,
        transfer: { toHost, toDevice: local.bytesToDevice + 4 * n, reads: 1 },
      },
    }
  }
}
