/**
 * @module The native addon's shape (native/*.cc, loaded by kernels/native-gemm.ts): the GEMM's
 * arguments, the fused kernels and the addon's own controls, as types only. They live here, below
 * every file that loads or calls the addon, so that the loader, the WebAssembly GEMM and the
 * kernels' callers all import them downward (kernels/ imports nothing above it).
 */
import type { adamwUpdate } from './adamw-update.js'

/** C = op(A)·op(B): pointers, sizes, transposes, then batch and byte strides (by default one product). */
export type GemmArgs = [
  a: number,
  b: number,
  c: number,
  M: number,
  K: number,
  N: number,
  tA: boolean,
  tB: boolean,
  batch?: number,
  sa?: number,
  sb?: number,
  sc?: number,
]

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
  /** The JS update (kernels/adamw-update.ts) in native code: the same arguments, the same bits. */
  adamw: typeof adamwUpdate
  sumSquares(g: Float32Array): number
}

/** The addon's functions. Pointers and strides are byte offsets into `buffer` (doubles: heaps reach 4 GiB). */
export type NativeGemmAddon = NativeOps & {
  cpuSupported(): boolean
  gemm(buffer: ArrayBuffer, ...args: [...Required<GemmArgs>, accumulate: boolean]): void
  /** The thread count of the GEMM and the fused kernels (1–64, the caller included); answers it. */
  setThreads(n: number): number
  /** The GEMM's micro-kernel: `avx512` (the default where the CPU has AVX-512F) or `avx2`; answers the one in use
   * (no argument: only answers). Both give the same bits. */
  setIsa(isa?: 'avx2' | 'avx512'): 'avx2' | 'avx512'
  /** Whether the bf16 GEMM (native/gemm-bf16.cc) runs here: built with it and a CPU with AVX512_BF16. Absent from
   * addons built before it. */
  hasBf16?(): boolean
  /** Every product's operands: `fp32` (the default) or `bf16` (rounded to bfloat16, float32 sums: native/gemm-bf16.cc
   * where hasBf16(), else its emulation, native/gemm-bf16-emu.cc); answers the one in use (no argument: only
   * answers). Absent from addons built before it; throws on `bf16` where hasBf16() is false in addons built before
   * the emulation (those lack bf16Kernel). */
  setPrecision?(precision?: 'fp32' | 'bf16'): 'fp32' | 'bf16'
  /** The kernel bf16 products run on here: AMX tiles, vdpbf16ps, or the AVX2 emulation (no AVX512_BF16, or
   * `LEVANTER_BF16_EMULATE=1`, read when bf16 is switched on). Absent from addons built before the emulation. */
  bf16Kernel?(): 'amx' | 'vdpbf16ps' | 'emulated'
  /** Whether products of at most 4 rows take the small-M path (native/gemv.cc, the default) or the blocked GEMM
   * (`LEVANTER_NATIVE_SMALL_M=0`); answers the setting (no argument: only answers). Both give the same bits. Absent
   * from addons built before it. */
  setSmallM?(on?: boolean): boolean
  /** C (+)= A·op(B) for M rows of A [M, K] on the decode step's batch kernel (native/gemv-batch.h), on the pool's
   * threads: `avx2` its AVX2 form where the CPU has AVX-512 too, `tB` B given as [N, K] (op(B) its transpose).
   * For tests and benches. Absent from addons built before it. */
  gemmRowsBatch?(
    a: Float32Array,
    b: Float32Array,
    c: Float32Array,
    M: number,
    K: number,
    N: number,
    accumulate: boolean,
    avx2?: boolean,
    tB?: boolean,
  ): void
  /**
   * This machine's memory bandwidth on the calling thread alone, or with `threads` > 1 on all the pool's threads
   * (each pass in chunks they claim in turn, as the decode step's products are), STREAM-style over arrays of
   * `megabytes` MB each (far past the caches), best of `repeats`: copy (a = b, 2 arrays' bytes a pass), triad
   * (a = b + s·c, 3) and a read-only sum (1), in GB/s (10^9 bytes); `…Cpu`: over the CPU time spent, so per core.
   * Absent from addons built before it (callers check).
   */
  memoryBandwidth?(
    megabytes: number,
    repeats: number,
    threads?: number,
  ): { copy: number; triad: number; read: number; copyCpu: number; readCpu: number; threads: number }
}
