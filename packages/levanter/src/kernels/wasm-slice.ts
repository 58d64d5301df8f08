/**
 * @module Slice and SplitV kernels for the wasm backend. The stock Slice copies the whole input
 * off the heap (`readSync`) before copying out the part it wants, and SplitV slices once per
 * piece: splitting GPT-2's fused q/k/v activation [16, 128, 768] into three took ~13 ms, three
 * copies of the whole tensor. These kernels copy the slice's contiguous runs straight from the
 * input's heap view. Strings and other dtypes go to the stock kernel.
 */
import { backend_util, slice_util, util } from '@tensorflow/tfjs'
import type { KernelConfig, KernelFunc, NamedAttrMap, TensorInfo } from '@tensorflow/tfjs'

type HeapBackend = {
  makeOutput(shape: number[], dtype: string): TensorInfo
  typedArrayFromHeap(t: TensorInfo): Float32Array | Int32Array
}

/** Copies x[begin : begin + size] on the heap into a new tensor. */
function heapSlice(backend: HeapBackend, x: TensorInfo, begin: number[], size: number[]): TensorInfo {
  const out = backend.makeOutput(size, x.dtype)
  const total = util.sizeFromShape(size)
  if (total === 0) return out
  // views after makeOutput: an allocation may have grown (and replaced) the heap buffer
  const xs = backend.typedArrayFromHeap(x),
    os = backend.typedArrayFromHeap(out)
  const strides = util.computeStrides(x.shape)
  if (slice_util.isSliceContinous(x.shape, begin, size)) {
    const at = slice_util.computeFlatOffset(begin, strides)
    os.set(xs.subarray(at, at + total))
    return out
  }
  // the innermost axes the slice takes whole form one contiguous run; walk the rest as an odometer
  const rank = x.shape.length
  let inner = rank - 1
  let run = size[rank - 1]!
  while (inner > 0 && size[inner] === x.shape[inner] && begin[inner] === 0) run *= size[--inner]!
  const idx = new Array<number>(inner).fill(0)
  for (let o = 0; o < total; o += run) {
    let at = begin[inner]! * (strides[inner] ?? 1)
    for (let a = 0; a < inner; a++) at += (begin[a]! + idx[a]!) * strides[a]!
    os.set(xs.subarray(at, at + run), o)
    for (let a = inner - 1; a >= 0; a--) {
      if (++idx[a]! < size[a]!) break
      idx[a] = 0
    }
  }
  return out
}

const takes = (x: TensorInfo) => x.dtype === 'float32' || x.dtype === 'int32'

export function wasmSlice(stock: KernelFunc): KernelConfig {
  const kernelFunc: KernelFunc = (args) => {
    const { x } = args.inputs as { x: TensorInfo }
    if (!takes(x)) return stock(args)
    const { begin, size } = args.attrs as NamedAttrMap & { begin: number | number[]; size: number | number[] }
    const [b, s] = slice_util.parseSliceParams(x as never, begin, size)
    return heapSlice(args.backend as unknown as HeapBackend, x, b!, s!)
  }
  return { kernelName: 'Slice', backendName: 'wasm', kernelFunc }
}

export function wasmSplitV(stock: KernelFunc): KernelConfig {
  const kernelFunc: KernelFunc = (args) => {
    const { x } = args.inputs as { x: TensorInfo }
    if (!takes(x)) return stock(args)
    const { numOrSizeSplits, axis } = args.attrs as NamedAttrMap & { numOrSizeSplits: number | number[]; axis: number }
    const ax = util.parseAxisParam(axis, x.shape)[0]!
    const sizes = backend_util.prepareSplitSize(x as never, numOrSizeSplits, ax)
    const begin = new Array<number>(x.shape.length).fill(0)
    return sizes.map((n) => {
      const size = [...x.shape]
      size[ax] = n
      const piece = heapSlice(args.backend as unknown as HeapBackend, x, [...begin], size)
      begin[ax]! += n
      return piece
    })
  }
  return { kernelName: 'SplitV', backendName: 'wasm', kernelFunc }
}
