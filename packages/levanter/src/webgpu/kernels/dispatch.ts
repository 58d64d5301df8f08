/**
 * @module Running a WGSL compute shader of levanter's on the tfjs webgpu backend, in the backend's
 * own command stream: tensors are bound where they live (their GPU buffers), dispatches are
 * recorded into the backend's compute pass in order with its own programs, and the backend's
 * bookkeeping is kept (a buffer bound by a pending command is released only after submission; the
 * batch of dispatches is submitted at the backend's size; under `tf.profile` each dispatch gets its
 * GPU time from timestamp queries as the backend's programs do). tfjs's program generator binds one
 * writable output per program; these shaders declare their own bindings, so one dispatch may write
 * several tensors (AdamW's parameter and both moments).
 */
import * as tf from '@tensorflow/tfjs'
import type { TensorInfo } from '@tensorflow/tfjs'

/** The parts of tfjs-backend-webgpu 4.22's `WebGPUBackend` a dispatch uses. */
export type WebGpuBackendLike = {
  readonly device: GPUDevice
  readonly queue: GPUQueue
  readonly tensorMap: { get(id: object): { resource?: unknown; shape: number[]; dtype: string; refCount: number } }
  readonly bufferManager: { acquireBuffer(size: number, usage: number): GPUBuffer }
  readonly uniformPendingDisposal: GPUBuffer[]
  commandQueueOwnedIds: WeakSet<object>
  commandEncoder: GPUCommandEncoder | null
  computePassEncoder: GPUComputePassEncoder | null
  dispatchCountInPass: number
  activeTimers: { name: string; query: Promise<number> }[] | null
  readonly supportTimestampQuery: boolean
  querySet: GPUQuerySet | null
  readonly querySetCount: number
  makeTensorInfo(shape: number[], dtype: tf.DataType): tf.TensorInfo
  uploadToGPU(dataId: object): void
  disposeData(dataId: object, force?: boolean): boolean
  ensureCommandEncoderReady(): void
  endComputePassEncoder(): void
  submitQueue(): void
  getQueryTime(): Promise<number>
}

/** Largest workgroup count along one dispatch dimension that WebGPU guarantees. */
export const MAX_WORKGROUPS = 65535

/** A compute shader; its pipeline is compiled once per device. */
export class WgslKernel {
  readonly #pipelines = new WeakMap<GPUDevice, GPUComputePipeline>()

  /** @param name the label in profiles @param code WGSL with entry point `main` */
  constructor(
    readonly name: string,
    readonly code: string,
  ) {}

  pipeline(device: GPUDevice): GPUComputePipeline {
    let p = this.#pipelines.get(device)
    if (!p) {
      const module = device.createShaderModule({ code: this.code, label: this.name })
      p = device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint: 'main' }, label: this.name })
      this.#pipelines.set(device, p)
    }
    return p
  }

  /**
   * Record one dispatch of `workgroups` over `buffers` (bindings 0…n-1 in order: tensors, bound where they live) and
   * `uniforms` (binding n: 32-bit values, floats unless listed in `ints`), after the backend's earlier work.
   */
  dispatch(
    backend: WebGpuBackendLike,
    buffers: readonly tf.TensorInfo[],
    uniforms: readonly number[],
    workgroups: readonly [number, number?, number?],
    ints: ReadonlySet<number> = new Set(),
  ): void {
    const b = backend
    const entries: GPUBindGroupEntry[] = buffers.map((t, i) => {
      b.uploadToGPU(t.dataId)
      b.commandQueueOwnedIds.add(t.dataId)
      return { binding: i, resource: { buffer: b.tensorMap.get(t.dataId)!.resource as GPUBuffer } }
    })
    // uniform struct of 4-byte fields, padded to 16 bytes
    const bytes = Math.max(16, Math.ceil((uniforms.length * 4) / 16) * 16)
    const raw = new ArrayBuffer(bytes)
    const f = new Float32Array(raw),
      n = new Int32Array(raw)
    uniforms.forEach((u, i) => (ints.has(i) ? (n[i] = u) : (f[i] = u)))
    const ub = b.bufferManager.acquireBuffer(bytes, GPUBufferUsage.COPY_DST | GPUBufferUsage.UNIFORM)
    b.queue.writeBuffer(ub, 0, raw, 0, bytes)
    b.uniformPendingDisposal.push(ub)
    entries.push({ binding: buffers.length, resource: { buffer: ub } })
    const pipeline = this.pipeline(b.device)
    const group = b.device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries })
    const timed = b.activeTimers !== null && b.activeTimers !== undefined
    b.ensureCommandEncoderReady()
    if (timed && b.supportTimestampQuery) {
      b.endComputePassEncoder()
      b.querySet ??= b.device.createQuerySet({ type: 'timestamp', count: b.querySetCount })
      b.computePassEncoder = b.commandEncoder!.beginComputePass({
        timestampWrites: { querySet: b.querySet, beginningOfPassWriteIndex: 0, endOfPassWriteIndex: 1 },
      })
    } else if (!b.computePassEncoder) b.computePassEncoder = b.commandEncoder!.beginComputePass({})
    const pass = b.computePassEncoder!
    pass.setPipeline(pipeline)
    pass.setBindGroup(0, group)
    pass.dispatchWorkgroups(workgroups[0], workgroups[1] ?? 1, workgroups[2] ?? 1)
    b.dispatchCountInPass++
    if (timed || tf.env().getNumber('WEBGPU_DEFERRED_SUBMIT_BATCH_SIZE') <= b.dispatchCountInPass) {
      b.endComputePassEncoder()
      if (timed) b.activeTimers!.push({ name: this.name, query: b.getQueryTime() })
      else b.submitQueue()
    }
  }
}

/** A new float32 tensor of `shape` on the backend, its buffer allocated (contents undefined until written). */
export function newTensor(backend: WebGpuBackendLike, shape: number[]): tf.TensorInfo {
  const t = backend.makeTensorInfo(shape, 'float32')
  backend.uploadToGPU(t.dataId)
  return t
}

/** Workgroups covering `n` items at `perGroup` each, over at most two dimensions. */
export function grid(n: number, perGroup: number): [number, number] {
  const groups = Math.max(1, Math.ceil(n / perGroup))
  return groups <= MAX_WORKGROUPS ? [groups, 1] : [MAX_WORKGROUPS, Math.ceil(groups / MAX_WORKGROUPS)]
}

/** Threads per row for rows `width` floats wide: the width rounded up to a power of two, 32…256 (a wider row loops). */
export function threadsPerRow(width: number): number {
  let wg = 32
  while (wg < 256 && wg < width) wg *= 2
  return wg
}

/**
 * WGSL: a tree reduction over the workgroup of each thread's `v`, through `red` (a workgroup array
 * of `WG` floats), joining two partials with `join` (`a + b` by default); every thread then has
 * `let out` and may use `red` again. The same order on every call, so the same bits.
 */
export const workgroupReduce = (
  WG: number,
  v: string,
  out: string,
  join: (a: string, b: string) => string = (a, b) => `${a} + ${b}`,
) => `
  red[lid] = ${v};
  workgroupBarrier();
  for (var k = ${WG / 2}u; k > 0u; k = k >> 1u) {
    if (lid < k) { red[lid] = ${join('red[lid]', 'red[lid + k]')}; }
    workgroupBarrier();
  }
  let ${out} = red[0];
  workgroupBarrier();`

/**
 * WGSL: the entry point of a row kernel with `WG` threads — one workgroup per row of a 2-D grid ({@link grid}),
 * rows past `u.rows` idle — and its workgroup array `red` for {@link workgroupReduce}. `body` runs with `row`,
 * `base` (= row · `width`, the row's first element) and `lid` (the thread) in scope.
 */
export const rowMain = (WG: number, width: string, body: string) => `
var<workgroup> red: array<f32, ${WG}>;

@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let row = wid.y * nwg.x + wid.x;
  if (row >= u.rows) { return; }
  let base = row * ${width};
${body}
}`

/** Arguments a kernel function gets from tfjs. */
export type KernelArgs = { inputs: Record<string, TensorInfo>; backend: unknown; attrs?: Record<string, unknown> }

/** Throws unless every tensor is float32 (the only type these kernels take), naming `what`. */
export function float32Only(what: string, ...ts: TensorInfo[]): void {
  for (const t of ts) if (t.dtype !== 'float32') throw new Error(`levanter ${what} take float32, got ${t.dtype}`)
}

const rowKernels = new Map<string, WgslKernel>()
/** The kernel `name` for rows `width` wide: one pipeline per name and {@link threadsPerRow}, from `code(WG)`. */
export function rowKernel(name: string, width: number, code: (WG: number) => string): WgslKernel {
  const wg = threadsPerRow(width)
  const key = `${name}/${wg}`
  let k = rowKernels.get(key)
  if (!k) {
    k = new WgslKernel(name, code(wg))
    rowKernels.set(key, k)
  }
  return k
}
