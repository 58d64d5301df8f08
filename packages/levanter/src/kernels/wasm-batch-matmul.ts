/**
 * @module BatchMatMul kernel for the wasm backend. The stock kernel hands a product to XNNPACK
 * only when both operands have batch 1 and no transpose flag; anything batched (attention's
 * [B·H, T, K] products) or transposed falls to a naive loop 10–35× slower. This kernel runs every
 * float32 product, transposed or batched, on levanter's own GEMM (kernels/wasm-gemm.ts: FMA where
 * relaxed SIMD exists, ~1.5× XNNPACK's rate here, transposes read in place). Where that GEMM cannot
 * run it keeps XNNPACK for batched products: a broadcast right operand makes the product one 2-D
 * matMul over the stacked rows, and otherwise each batch slice runs as its own 2-D matMul on views
 * of the operands and the output (no copies); transpose flags then go to the stock kernel.
 * Partial broadcasts always go to the stock kernel.
 */
import type { KernelConfig, KernelFunc, NamedAttrMap, TensorInfo } from '@tensorflow/tfjs'
import { gemmFor } from './wasm-gemm.js'
import { WasmHeap } from './wasm-heap.js'
import type { WasmBackendLike } from './wasm-heap.js'

type MatMulFn = (
  aId: number,
  aShape: Uint8Array,
  aRank: number,
  bId: number,
  bShape: Uint8Array,
  bRank: number,
  tA: number,
  tB: number,
  outId: number,
) => void

const prod = (xs: readonly number[]) => xs.reduce((p, q) => p * q, 1)
const shapeBytes = (s: readonly number[]) => new Uint8Array(new Int32Array(s).buffer)
const fns = new WeakMap<object, MatMulFn>()

function matMulFn(backend: WasmBackendLike): MatMulFn {
  let f = fns.get(backend)
  if (!f) {
    f = backend.wasm.cwrap('BatchMatMul', null, [
      'number',
      'array',
      'number',
      'number',
      'array',
      'number',
      'number',
      'number',
      'number',
    ]) as MatMulFn
    fns.set(backend, f)
  }
  return f
}

/** The kernel, deferring to `stock` for the cases it does not take. */
export function wasmBatchMatMul(stock: KernelFunc): KernelConfig {
  const kernelFunc: KernelFunc = (args) => {
    const { a, b } = args.inputs as { a: TensorInfo; b: TensorInfo }
    const attrs = args.attrs as NamedAttrMap
    const tA = Boolean(attrs.transposeA),
      tB = Boolean(attrs.transposeB)
    if (a.dtype !== 'float32' || b.dtype !== 'float32' || a.shape.length < 2 || b.shape.length < 2) return stock(args)
    const backend = args.backend as unknown as WasmBackendLike
    const gemm = gemmFor(backend.wasm)
    if (!gemm && (tA || tB)) return stock(args)
    const [a0, a1] = a.shape.slice(-2) as [number, number]
    const [b0, b1] = b.shape.slice(-2) as [number, number]
    const [M, K] = tA ? [a1, a0] : [a0, a1]
    const [K2, N] = tB ? [b1, b0] : [b0, b1]
    const outerA = a.shape.slice(0, -2),
      outerB = b.shape.slice(0, -2)
    const batchA = prod(outerA),
      batchB = prod(outerB)
    if (K !== K2 || K === 0 || (!gemm && batchA === 1 && batchB === 1)) return stock(args)
    const sameOuter = outerA.length === outerB.length && outerA.every((d, i) => d === outerB[i])
    // Broadcast takes only a whole operand of batch 1 (the common cases); others go to stock.
    const outer = sameOuter
      ? outerA
      : batchB === 1 && outerB.length <= outerA.length
        ? outerA
        : batchA === 1 && outerA.length <= outerB.length
          ? outerB
          : undefined
    if (!outer) return stock(args)
    const heap = new WasmHeap(backend)
    const out = backend.makeOutput([...outer, M, N], 'float32')
    if (gemm) {
      const [pa, pb, pc] = [heap.offset(a), heap.offset(b), heap.offset(out)]
      if (batchB === 1 && !tA)
        gemm.run(pa, pb, pc, batchA * M, K, N, false, tB) // stacked rows share the right operand
      else
        gemm.run(
          pa,
          pb,
          pc,
          M,
          K,
          N,
          tA,
          tB,
          Math.max(batchA, batchB),
          batchA === 1 ? 0 : M * K * 4,
          batchB === 1 ? 0 : K * N * 4,
          M * N * 4,
        )
      return out
    }
    const mm = matMulFn(backend)
    if (batchB === 1) {
      // Rows of every batch slice share the weights: one [batchA·M, K] · [K, N] product.
      mm(heap.id(a), shapeBytes([1, batchA * M, K]), 3, heap.id(b), shapeBytes([1, K, N]), 3, 0, 0, heap.id(out))
      return out
    }
    const aOff = heap.offset(a),
      bOff = heap.offset(b),
      oOff = heap.offset(out)
    const aShape = shapeBytes([1, M, K]),
      bShape = shapeBytes([1, K, N])
    const aFixed = batchA === 1 ? heap.id(a) : undefined
    for (let i = 0; i < batchB; i++) {
      const aId = aFixed ?? heap.view(aOff + i * M * K * 4, M * K)
      const bId = heap.view(bOff + i * K * N * 4, K * N)
      const oId = heap.view(oOff + i * M * N * 4, M * N)
      try {
        mm(aId, aShape, 3, bId, bShape, 3, 0, 0, oId)
      } finally {
        if (aFixed === undefined) heap.dropView(aId)
        heap.dropView(bId)
        heap.dropView(oId)
      }
    }
    return out
  }
  return { kernelName: 'BatchMatMul', backendName: 'wasm', kernelFunc }
}
