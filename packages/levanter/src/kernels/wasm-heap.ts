/**
 * @module Access to the wasm backend's heap for levanter's wasm kernels: a tensor's offset,
 * fresh output tensors, and *views* — extra tensor ids registered over a sub-range of an
 * existing buffer, so the backend's own compiled kernels can run on one slice of a tensor
 * without copying it. A view owns no memory; {@link WasmHeap.dropView} forgets it (and lets
 * the backend release whatever it cached for that id, e.g. packed XNNPACK weights).
 */
import * as tf from '@tensorflow/tfjs'
import type { TensorInfo } from '@tensorflow/tfjs'
import { LevanterError } from '../errors.js'

/** The parts of the wasm backend (tfjs-backend-wasm's BackendWasm) the kernels rely on. */
export type WasmBackendLike = {
  dataIdNextNumber: number
  dataIdMap: { get(dataId: object): { id: number; memoryOffset: number; refCount: number } | undefined }
  makeOutput(shape: number[], dtype: 'float32'): TensorInfo
  wasm: {
    HEAPF32: Float32Array
    /** The module's memory (another wasm module can import it: kernels/wasm-gemm.ts) and its allocator. */
    asm: { memory: object; malloc?: (bytes: number) => number }
    _malloc(bytes: number): number
    cwrap(name: string, ret: null, args: string[]): (...a: unknown[]) => void
    tfjs: { registerTensor(id: number, size: number, offset: number): void; disposeData(id: number): void }
  }
}

export class WasmHeap {
  constructor(readonly backend: WasmBackendLike) {}

  /** Backend-internal id of a tensor (what the compiled kernels take). */
  id(t: TensorInfo): number {
    return this.backend.dataIdMap.get(t.dataId)!.id
  }

  /** Byte offset of a tensor's data on the heap. */
  offset(t: TensorInfo): number {
    return this.backend.dataIdMap.get(t.dataId)!.memoryOffset
  }

  /** Register an id over `size` floats at byte `offset` (inside a live tensor). */
  view(offset: number, size: number): number {
    const id = this.backend.dataIdNextNumber++
    this.backend.wasm.tfjs.registerTensor(id, size, offset)
    return id
  }

  dropView(id: number): void {
    this.backend.wasm.tfjs.disposeData(id)
  }

  /** The heap as floats (re-read after any allocation: the heap may have grown). */
  f32(): Float32Array {
    return this.backend.wasm.HEAPF32
  }
}

type HeapEntry = { wasm: WasmBackendLike['wasm']; id: number; offset: number; size: number; refCount: number }

/** Where a float32 tensor lives on the wasm heap; undefined on other backends and for other dtypes. */
function heapEntry(t: TensorInfo, backend: unknown): HeapEntry | undefined {
  const b = backend as Partial<WasmBackendLike>
  if (t.dtype !== 'float32' || !b.dataIdMap || !b.wasm) return undefined
  const d = b.dataIdMap.get(t.dataId)
  if (!d || typeof d.memoryOffset !== 'number') return undefined
  return {
    wasm: b.wasm,
    id: d.id,
    offset: d.memoryOffset,
    size: t.shape.reduce((p, q) => p * q, 1),
    refCount: d.refCount,
  }
}

const floatsOf = (e: HeapEntry) => e.wasm.HEAPF32.subarray(e.offset / 4, e.offset / 4 + e.size)

/** A float32 tensor's data on the wasm heap, read in place (no copy); undefined on other backends. Valid until the next
 * allocation. */
export function heapFloats(t: TensorInfo, backend: unknown): Float32Array | undefined {
  const e = heapEntry(t, backend)
  return e && floatsOf(e)
}

/**
 * A float32 tensor's own storage on the wasm heap, to update in place, when nothing else shares its
 * buffer (reshapes and levanter's copy-free Identity share buffers and raise the count); otherwise,
 * and on other backends, undefined. `data` is valid until the next allocation (the heap may grow).
 * Call `written()` after writing: the backend caches work derived from a tensor's values by its id
 * (XNNPACK packs a matMul's right operand once), and re-registering the id drops that cache.
 */
export function writableHeapFloats(
  t: TensorInfo,
  backend: unknown,
): { data: Float32Array; written(): void } | undefined {
  const e = heapEntry(t, backend)
  if (e?.refCount !== 1) return undefined
  return {
    data: floatsOf(e),
    written() {
      e.wasm.tfjs.disposeData(e.id)
      e.wasm.tfjs.registerTensor(e.id, e.size, e.offset)
    },
  }
}

/**
 * On wasm, a new float32 tensor of `shape` filled by `fill(out, ...inputs)`, a JS loop over the
 * heap in place (no copies in or out); undefined on other backends or when an input is not float32
 * on the heap, for the caller to compute with tensor ops instead.
 */
export function heapKernel(
  shape: number[],
  inputs: readonly tf.Tensor[],
  fill: (out: Float32Array, ...inputs: Float32Array[]) => void,
): tf.Tensor | undefined {
  return heapKernels([shape], inputs, (outs, ins) => fill(outs[0]!, ...ins))?.[0]
}

/** {@link heapKernel} with several outputs: new float32 tensors of `shapes`, filled together. */
export function heapKernels(
  shapes: readonly number[][],
  inputs: readonly tf.Tensor[],
  fill: (outs: Float32Array[], inputs: Float32Array[]) => void,
): tf.Tensor[] | undefined {
  const backend = tf.backend()
  const b = backend as unknown as Partial<WasmBackendLike>
  if (!b.dataIdMap || !b.wasm || typeof b.makeOutput !== 'function' || inputs.some((t) => !heapEntry(t, b)))
    return undefined
  const outs = shapes.map((s) => tf.engine().makeTensorFromTensorInfo(b.makeOutput!(s, 'float32'), backend))
  // views after the allocations: they may have grown (and replaced) the heap buffer
  fill(
    outs.map((o) => heapFloats(o, b)!),
    inputs.map((t) => heapFloats(t, b)!),
  )
  return outs
}

/** Most a wasm heap can hold: a wasm32 memory's 65536 pages of 64 KiB. */
export const WASM_HEAP_MAX_BYTES = 4 * 2 ** 30

const guarded = new WeakSet<object>()
const MiB = (n: number) => (n / 2 ** 20).toFixed(0)
let heapLimit = WASM_HEAP_MAX_BYTES

/** The limit the heap guard's message names: 4 GiB, or what parallel/heap-limit.ts `holdWasmHeapTo` held it to. */
export function noteWasmHeapLimit(bytes: number): void {
  heapLimit = bytes
}
const limitText = () =>
  heapLimit >= 2 ** 30 ? `${Number((heapLimit / 2 ** 30).toFixed(1))} GiB` : `${MiB(heapLimit)} MiB`

/**
 * Makes the wasm backend's allocator throw `OUT_OF_MEMORY` when the heap cannot grow to hold a
 * new tensor, instead of handing back offset 0 (tfjs then registers the tensor there and the next
 * kernel fails with an opaque "memory access out of bounds"). Idempotent; a no-op off wasm.
 */
export function guardHeap(backend: unknown): void {
  const wasm = (backend as Partial<WasmBackendLike>).wasm
  const raw = wasm?.asm?.malloc
  if (!wasm || typeof raw !== 'function' || guarded.has(wasm)) return
  guarded.add(wasm)
  wasm._malloc = (bytes: number): number => {
    const at = raw(bytes)
    if (at === 0 && bytes > 0)
      throw new LevanterError(
        'OUT_OF_MEMORY',
        `wasm heap full: cannot allocate ${MiB(bytes)} MiB with ${MiB(wasm.HEAPF32.byteLength)} MiB of the ` +
          `${limitText()} wasm heap in use; shard the model over processes (mesh: { data: 2 }, fsdp: true, or ` +
          'mesh: { model: 2 }), or lower batchSize (microbatches)',
      )
    return at
  }
}
