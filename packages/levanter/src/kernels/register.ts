/**
 * @module Register levanter's gradients over the stock ones and its kernels over the wasm
 * backend's (once), and put the stock ones back (tests compare against them).
 */
import * as tf from '@tensorflow/tfjs'
import type { GradConfig, KernelConfig } from '@tensorflow/tfjs'
import { batchMatMulGrad } from './batch-matmul-grad.js'
import { gatherGrad } from './gather-grad.js'
import { installLeanBackprop, uninstallLeanBackprop } from './lean-backprop.js'
import { wasmBatchMatMul } from './wasm-batch-matmul.js'
import { wasmGather } from './wasm-gather.js'
import { markGemmKernel } from './wasm-gemm.js'
import { wasmCast, wasmIdentity } from './wasm-identity.js'
import { wasmSlice, wasmSplitV } from './wasm-slice.js'
import { wasmTranspose } from './wasm-transpose.js'
import { guardHeap } from './wasm-heap.js'
import { registerWebGpuKernels, unregisterWebGpuKernels } from '../webgpu/kernels/register.js'

let stock: Map<string, GradConfig | undefined> | undefined
let stockKernels: KernelConfig[] | undefined

// Registering twice under one name makes tfjs warn; silence that one message while we override.
function quietly(f: () => void): void {
  const warn = console.warn
  console.warn = () => {}
  try {
    f()
  } finally {
    console.warn = warn
  }
}

/** Kernels levanter replaces on the wasm backend, built over the stock kernel they defer to. */
const WASM_KERNELS: Record<string, (stock: tf.KernelFunc) => KernelConfig> = {
  BatchMatMul: wasmBatchMatMul,
  Transpose: wasmTranspose,
  Identity: wasmIdentity,
  Cast: wasmCast,
  Slice: wasmSlice,
  SplitV: wasmSplitV,
  GatherV2: wasmGather,
}

/** Guard the wasm heap's allocator (`OUT_OF_MEMORY`, kernels/wasm-heap.ts), install the fast/correct gradients, the
 * lean backward pass (kernels/lean-backprop.ts), the wasm kernels when
 * that backend is registered, and the WGSL kernels for webgpu (webgpu/kernels/). Idempotent; `initBackend` calls it. */
export function registerLevanterKernels(): void {
  if (tf.getBackend() === 'wasm') guardHeap(tf.backend())
  if (stock) return
  stock = new Map()
  for (const name of ['BatchMatMul', 'GatherV2']) stock.set(name, tf.getGradient(name))
  quietly(() => tf.registerGradient(batchMatMulGrad))
  quietly(() => tf.registerGradient(gatherGrad(stock!.get('GatherV2')?.gradFunc)))
  stockKernels = []
  for (const [name, make] of Object.entries(WASM_KERNELS)) {
    const k = tf.getKernel(name, 'wasm')
    if (!k) continue
    stockKernels.push(k)
    // Keep the stock setup: it prepares the stock kernel we defer to, should the backend start later.
    quietly(() => tf.registerKernel({ ...make(k.kernelFunc), ...(k.setupFunc ? { setupFunc: k.setupFunc } : {}) }))
  }
  markGemmKernel(stockKernels.some((k) => k.kernelName === 'BatchMatMul'))
  registerWebGpuKernels()
  installLeanBackprop()
}

/** Restore the stock gradients and kernels (to compare against them). */
export function unregisterLevanterKernels(): void {
  if (!stock) return
  for (const g of stock.values()) if (g) quietly(() => tf.registerGradient(g))
  for (const k of stockKernels ?? []) quietly(() => tf.registerKernel(k))
  stock = undefined
  stockKernels = undefined
  markGemmKernel(false)
  unregisterWebGpuKernels()
  uninstallLeanBackprop()
}
