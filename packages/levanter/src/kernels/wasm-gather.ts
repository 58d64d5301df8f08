/**
 * @module GatherV2 for the wasm backend along axis 0 (embedding lookups): each output row is one
 * `copyWithin` of a table row on the heap. The stock kernel copies element by element through
 * strides (tens of milliseconds for GPT-2's 2048 × 256 lookup here, a fraction of a millisecond
 * this way). Other axes, batch dimensions, dtypes other than float32 and out-of-range indices go to
 * the stock kernel.
 */
import type { KernelConfig, KernelFunc, NamedAttrMap, TensorInfo } from '@tensorflow/tfjs'
import { WasmHeap } from './wasm-heap.js'
import type { WasmBackendLike } from './wasm-heap.js'

export function wasmGather(stock: KernelFunc): KernelConfig {
  const kernelFunc: KernelFunc = (args) => {
    const { x, indices } = args.inputs as { x: TensorInfo; indices: TensorInfo }
    const attrs = args.attrs as NamedAttrMap
    const axis = Number(attrs.axis ?? 0),
      batchDims = Number(attrs.batchDims ?? 0)
    if (
      x.dtype !== 'float32' ||
      indices.dtype !== 'int32' ||
      batchDims !== 0 ||
      (axis !== 0 && axis !== -x.shape.length)
    )
      return stock(args)
    const backend = args.backend as unknown as WasmBackendLike
    const heap = new WasmHeap(backend)
    const rows = x.shape[0]!,
      width = x.shape.slice(1).reduce((p, q) => p * q, 1),
      n = indices.shape.reduce((p, q) => p * q, 1)
    const idx = new Int32Array(heap.f32().buffer, heap.offset(indices), n).slice()
    for (const i of idx) if (i < 0 || i >= rows) return stock(args)
    const out = backend.makeOutput([...indices.shape, ...x.shape.slice(1)], 'float32')
    // views after the allocation: it may have grown (and replaced) the heap buffer
    const f32 = heap.f32(),
      src = heap.offset(x) / 4,
      dst = heap.offset(out) / 4
    for (let r = 0; r < n; r++) f32.copyWithin(dst + r * width, src + idx[r]! * width, src + (idx[r]! + 1) * width)
    return out
  }
  return { kernelName: 'GatherV2', backendName: 'wasm', kernelFunc }
}
