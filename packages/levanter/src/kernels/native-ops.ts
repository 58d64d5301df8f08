/**
 * @module levanter's fused native kernels (native/ops.cc, in the same addon as the native GEMM):
 * LayerNorm and GELU forward and backward, attention's causal softmax and its backward,
 * cross-entropy with its gradient, column sums and AdamW, each one pass over float32 arrays in
 * place, on the addon's threads. {@link nativeKernels} answers them where the native GEMM is the
 * one in use on the wasm backend (so `LEVANTER_GEMM=fma` or `LEVANTER_NATIVE_DISABLE=1` runs the
 * all-WebAssembly path); callers fall back to their tensor-op or JS versions otherwise.
 */
import * as tf from '@tensorflow/tfjs'
import type { adamwUpdate } from '../optim/adamw.js'
import { nativeGemm } from './native-gemm.js'
import { gemmFor } from './wasm-gemm.js'
import type { WasmBackendLike } from './wasm-heap.js'

/** The addon's fused kernels. Every array is read or written in place; lengths are checked. */
export type NativeOps = {
  geluForward(x: Float32Array, y: Float32Array): void
  geluBackward(x: Float32Array, dy: Float32Array, dx: Float32Array): void
  layerNormForward(
    x: Float32Array,
    g: Float32Array,
    b: Float32Array,
    eps: number,
    y: Float32Array,
    xhat: Float32Array,
    rstd: Float32Array,
  ): void
  layerNormBackward(
    dy: Float32Array,
    xhat: Float32Array,
    rstd: Float32Array,
    g: Float32Array,
    dx: Float32Array,
    dg: Float32Array,
    db: Float32Array,
  ): void
  columnSum(x: Float32Array, out: Float32Array): void
  /** y = x·w + b for x [N, in], w [in, out], b [out] (sizes from the lengths). */
  affineForward(x: Float32Array, w: Float32Array, b: Float32Array, y: Float32Array): void
  /** qkv [B, T, 3·H·K] → out [B, T, H·K], keeping the probabilities P [B, H, T, T]. */
  attentionForward(
    qkv: Float32Array,
    out: Float32Array,
    P: Float32Array,
    B: number,
    T: number,
    H: number,
    K: number,
    scale: number,
  ): void
  attentionBackward(
    qkv: Float32Array,
    P: Float32Array,
    dout: Float32Array,
    dqkv: Float32Array,
    B: number,
    T: number,
    H: number,
    K: number,
    scale: number,
  ): void
  /**
   * One decode step's attention over a right-aligned KV cache, the cache grown by the new position: q row b at
   * b·qStride (H heads of K), the new k and v rows at b·kvStride (Hkv heads), past keys/values [B, Hkv, S, K] →
   * outK/outV [B, Hkv, S+1, K] and out [B, H·K]; row b attends to its last lengths[b] cached columns and the new one.
   * Absent from addons built before it (callers check).
   */
  decodeAttention?(
    q: Float32Array,
    k: Float32Array,
    v: Float32Array,
    pastK: Float32Array,
    pastV: Float32Array,
    lengths: Int32Array,
    outK: Float32Array,
    outV: Float32Array,
    out: Float32Array,
    H: number,
    Hkv: number,
    K: number,
    qStride: number,
    kvStride: number,
    scale: number,
  ): void
  /** Rows of S; row r is query r mod T at position offset + r mod T (causal: it sees keys up to there). */
  softmaxForward(
    x: Float32Array,
    y: Float32Array,
    S: number,
    T: number,
    offset: number,
    scale: number,
    causal: boolean,
  ): void
  /** x [B·H, T, S] with an additive bias [B, 1, T, S] shared by the H heads. */
  softmaxBiasForward(
    x: Float32Array,
    bias: Float32Array,
    y: Float32Array,
    S: number,
    T: number,
    H: number,
    scale: number,
  ): void
  softmaxBackward(y: Float32Array, dy: Float32Array, dx: Float32Array, S: number, scale: number): void
  /** Σ mask·nll / denom; writes d(that)/dlogits into `grad`. */
  crossEntropy(logits: Float32Array, targets: Int32Array, mask: Float32Array, denom: number, grad: Float32Array): number
  /** The JS update (optim/adamw.ts) in native code: the same arguments, the same bits. */
  adamw: typeof adamwUpdate
  sumSquares(g: Float32Array): number
}

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
