/**
 * @module levanter's fused native kernels (native/ops-*.cc, in the same addon as the native GEMM):
 * LayerNorm and GELU forward and backward, attention's causal softmax and its backward,
 * cross-entropy with its gradient, column sums and AdamW, each one pass over float32 arrays in
 * place, on the addon's threads. {@link nativeKernels} answers them where the native GEMM is the
 * one in use on the wasm backend (so `LEVANTER_GEMM=fma` or `LEVANTER_NATIVE_DISABLE=1` runs the
 * all-WebAssembly path); callers fall back to their tensor-op or JS versions otherwise.
 */
import * as tf from '@tensorflow/tfjs'
import type { NativeOps } from './native-addon.js'
import { nativeGemm } from './native-gemm.js'
import { gemmFor } from './wasm-gemm.js'
import type { WasmBackendLike } from './wasm-heap.js'

/** The addon's ops whatever the backend (AdamW works on plain arrays), or undefined where the addon does not run. */
export function nativeOpsAnywhere(): NativeOps | undefined {
  return nativeGemm().addon
}

/** The fused kernels where the native GEMM runs on the active (wasm) backend; undefined otherwise. */
export function nativeKernels(): NativeOps | undefined {
  if (tf.getBackend() !== 'wasm') return undefined
  const wasm = (tf.backend() as unknown as WasmBackendLike).wasm
  if (gemmFor(wasm)?.build !== 'native') return undefined
  return nativeOpsAnywhere()
}
