/**
 * @module Access to the wasm backend's heap for levanter's wasm kernels: a tensor's offset,
 * fresh output tensors, and *views* — extra tensor ids registered over a sub-range of an
 * existing buffer, so the backend's own compiled kernels can run on one slice of a tensor
 * without copying it. A view owns no memory; {@link WasmHeap.dropView} forgets it (and lets
 * the backend release whatever it cached for that id, e.g. packed XNNPACK weights).
 */
import type { TensorInfo } from '@tensorflow/tfjs'

/** The parts of the wasm backend (tfjs-backend-wasm's BackendWasm) the kernels rely on. */
export type WasmBackendLike = {
  dataIdNextNumber: number
  dataIdMap: { get(dataId: object): { id: number; memoryOffset: number } | undefined }
  makeOutput(shape: number[], dtype: 'float32'): TensorInfo
  wasm: {
    HEAPF32: Float32Array
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
