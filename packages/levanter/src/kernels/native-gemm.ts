/**
 * @module Loads levanter's native GEMM (native/gemm.cc, an N-API addon that `pnpm install` builds
 * with node-gyp and the machine's compiler, native/build.mjs): C (+)= op(A)·op(B) with AVX2/FMA,
 * on `LEVANTER_THREADS` threads, in place on a WebAssembly.Memory's buffer. {@link nativeGemm} answers the addon,
 * or why it cannot run here: not built, a CPU without AVX2/FMA, or `LEVANTER_NATIVE_DISABLE=1`
 * (read here only; it forces the WebAssembly GEMM, to test that path). Its micro-kernel is AVX-512
 * where the CPU has it, else AVX2 (the same bits); `LEVANTER_NATIVE_ISA=avx2|avx512` picks one. Products of at
 * most 4 rows (decoding) stream B in place without packing (native/gemv.cc, the same bits again);
 * `LEVANTER_NATIVE_SMALL_M=0` sends them to the blocked GEMM (to compare).
 */
import { existsSync } from 'node:fs'
import { availableParallelism } from 'node:os'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'
import { LevanterError } from '../errors.js'
import type { NativeGemmAddon } from './native-addon.js'

/**
 * The thread count `LEVANTER_THREADS` asks for, checked; by default every core this process may use
 * (`os.availableParallelism()`). Data-parallel replicas on one machine are started with their share
 * ({@link replicaThreadsEnv}).
 */
export function threadCount(env: string | undefined = process.env.LEVANTER_THREADS): number {
  if (env === undefined || env === '') return availableParallelism()
  const n = Number(env)
  if (!Number.isInteger(n) || n < 1 || n > 64)
    throw new LevanterError('BAD_CONFIG', `LEVANTER_THREADS=${env} is not an integer from 1 to 64; unset it or fix it`)
  return n
}

/** The environment for one of `replicas` processes sharing this machine: `LEVANTER_THREADS` as set here, else
 * the cores divided among them (at least 1 each). */
export function replicaThreadsEnv(replicas: number): { LEVANTER_THREADS: string } {
  const set = process.env.LEVANTER_THREADS
  return { LEVANTER_THREADS: set ? set : String(Math.max(1, Math.floor(availableParallelism() / replicas))) }
}

/** native/gemm-impl.h's blocking and the tiles of its AVX2 and AVX-512 kernels (tests aim their edge cases at them);
 * SMALL_L2 is the AVX2 kernel's blocks where a core's L2 is under 1 MiB (native/gemm.cc). */
export const NATIVE_BLOCKING = {
  MR: 6,
  NR: 16,
  MR512: 12,
  NR512: 32,
  KC: 256,
  MC: 144,
  NC: 1024,
  GROUP: 4,
  SMALL_L2: { MC: 48, NC: 2048, GROUP: 2 },
} as const

const ADDON = fileURLToPath(new URL('../../native/build/Release/levanter_gemm.node', import.meta.url))
let loaded: { addon?: NativeGemmAddon; reason?: string } | undefined

/** The addon where it runs here, else the reason it does not. */
export function nativeGemm(): { addon?: NativeGemmAddon; reason?: string } {
  if (process.env.LEVANTER_NATIVE_DISABLE === '1') return { reason: 'disabled by LEVANTER_NATIVE_DISABLE=1' }
  if (!loaded) loaded = load()
  return loaded
}

function load(): { addon?: NativeGemmAddon; reason?: string } {
  if (process.arch !== 'x64') return { reason: `it is built for x86-64 only, this is ${process.arch}` }
  if (!existsSync(ADDON))
    return { reason: 'not built (no C++ compiler or node-gyp at install; run pnpm install where g++ exists)' }
  let addon: NativeGemmAddon
  try {
    addon = createRequire(import.meta.url)(ADDON) as NativeGemmAddon
  } catch (e) {
    return { reason: `the built addon does not load: ${(e as Error).message}` }
  }
  if (!addon.cpuSupported()) return { reason: 'this CPU lacks AVX2/FMA' }
  addon.setThreads(threadCount())
  const smallM = process.env.LEVANTER_NATIVE_SMALL_M
  if (smallM !== undefined && smallM !== '') {
    if (smallM !== '0' && smallM !== '1')
      throw new LevanterError('BAD_CONFIG', `LEVANTER_NATIVE_SMALL_M=${smallM} is not 0 or 1; unset it or pick one`)
    addon.setSmallM?.(smallM === '1')
  }
  const isa = process.env.LEVANTER_NATIVE_ISA
  if (isa) {
    if (isa !== 'avx2' && isa !== 'avx512')
      throw new LevanterError('BAD_CONFIG', `LEVANTER_NATIVE_ISA=${isa} is not avx2 or avx512; unset it or pick one`)
    try {
      addon.setIsa(isa)
    } catch (e) {
      throw new LevanterError(
        'BAD_CONFIG',
        `LEVANTER_NATIVE_ISA=${isa}: ${(e as Error).message}; unset it or pick avx2`,
      )
    }
  }
  return { addon }
}

/** Whether the native bf16 GEMM runs here (the addon built with native/gemm-bf16.cc, a CPU with AVX512_BF16). */
export function hasBf16(): boolean {
  return nativeGemm().addon?.hasBf16?.() ?? false
}

/** Why the bf16 instructions (AVX512_BF16: native/gemm-bf16.cc, the bf16 decode weights) cannot run here, or
 * undefined where they can. bf16 products still run without them, emulated ({@link bf16ProductsUnavailable}). */
export function bf16Unavailable(): string | undefined {
  const { addon, reason } = nativeGemm()
  if (!addon) return `the native GEMM does not run here: ${reason}`
  if (!addon.hasBf16) return 'the native addon was built before its bf16 kernel; run pnpm install to rebuild it'
  if (!addon.hasBf16())
    return 'this CPU lacks AVX512_BF16 (vdpbf16ps), or the addon was built without it (a compiler lacking -mavx512bf16)'
  return undefined
}

/**
 * The kernel bf16 products run on here: `amx` or `vdpbf16ps` (native/gemm-bf16.cc), or `emulated` (a CPU without
 * AVX512_BF16, or `LEVANTER_BF16_EMULATE=1`: native/gemm-bf16-emu.cc, the same arithmetic as vdpbf16ps on AVX2 FMAs,
 * no faster than fp32); undefined where bf16 products cannot run at all ({@link bf16ProductsUnavailable}).
 */
export function bf16Kernel(): 'amx' | 'vdpbf16ps' | 'emulated' | undefined {
  return bf16ProductsUnavailable() ? undefined : nativeGemm().addon!.bf16Kernel!()
}

/** Why bf16 products cannot run here (no native GEMM, or an addon built before them), or undefined where they can:
 * on the bf16 instructions where the CPU has them, else emulated ({@link bf16Kernel}). */
export function bf16ProductsUnavailable(): string | undefined {
  const { addon, reason } = nativeGemm()
  if (!addon) return `the native GEMM does not run here: ${reason}`
  if (!addon.setPrecision || !addon.bf16Kernel)
    return 'the native addon was built before its bf16 kernels; run pnpm install to rebuild it'
  return undefined
}

/**
 * Run every native matrix product with `precision` operands from now on: `fp32` (the default, bit-exact as always)
 * or `bf16` (operands rounded to bfloat16 like PyTorch's float→bfloat16, float32 accumulation, native/gemm-bf16.cc,
 * emulated where the CPU lacks AVX512_BF16: {@link bf16Kernel}). Answers the precision before, to put back. `bf16`
 * where {@link bf16ProductsUnavailable} is a `BAD_CONFIG` naming why.
 */
export function setMatmulPrecision(precision: 'fp32' | 'bf16'): 'fp32' | 'bf16' {
  const addon = nativeGemm().addon
  if (precision === 'fp32') return addon?.setPrecision ? swap(addon, 'fp32') : 'fp32'
  const why = bf16ProductsUnavailable()
  if (why) throw new LevanterError('BAD_CONFIG', `precision bf16 needs the native bf16 GEMM: ${why}; use fp32`)
  return swap(addon!, 'bf16')
}

let bf16Calls = 0 // calls of withMatmulPrecision('bf16', …) under way
let beforeBf16Calls: 'fp32' | 'bf16' = 'fp32'

/**
 * Runs `call` with `precision` products from its start to its end, awaits included (a mesh member's step: its
 * products run between its collectives), then puts back the precision from before. bf16 calls that overlap (the
 * members of one mesh, actors in one process) share the setting: it goes back when the last one ends. fp32 runs
 * `call` as it is. `bf16` where {@link bf16ProductsUnavailable} is a `BAD_CONFIG` naming why.
 */
export async function withMatmulPrecision<T>(precision: 'fp32' | 'bf16', call: () => Promise<T>): Promise<T> {
  if (precision !== 'bf16') return call()
  if (bf16Calls === 0) beforeBf16Calls = setMatmulPrecision('bf16')
  bf16Calls++
  try {
    return await call()
  } finally {
    if (--bf16Calls === 0) setMatmulPrecision(beforeBf16Calls)
  }
}

function swap(addon: NativeGemmAddon, to: 'fp32' | 'bf16'): 'fp32' | 'bf16' {
  const before = addon.setPrecision!()
  addon.setPrecision!(to)
  return before
}

/**
 * C = bf16(op(A))·bf16(op(B)) with float32 sums on the native bf16 GEMM ({@link bf16Kernel}), for row-major A
 * [M, K] (or [K, M] with `tA`) and B [K, N] (or [N, K] with `tB`). Throws `BAD_CONFIG` where bf16 products cannot
 * run ({@link bf16ProductsUnavailable}).
 */
export function gemmBf16(
  a: Float32Array,
  b: Float32Array,
  M: number,
  K: number,
  N: number,
  opts: { tA?: boolean; tB?: boolean } = {},
): Float32Array {
  if (a.length !== M * K || b.length !== K * N)
    throw new LevanterError('BAD_CONFIG', `gemmBf16: A has ${a.length} and B ${b.length} elements, not M·K and K·N`)
  const why = bf16ProductsUnavailable()
  if (why) throw new LevanterError('BAD_CONFIG', `gemmBf16: ${why}`)
  const addon = nativeGemm().addon!
  const buffer = new ArrayBuffer((M * K + K * N + M * N) * 4)
  new Float32Array(buffer, 0, M * K).set(a)
  new Float32Array(buffer, M * K * 4, K * N).set(b)
  const before = swap(addon, 'bf16')
  try {
    const pc = (M * K + K * N) * 4
    addon.gemm(buffer, 0, M * K * 4, pc, M, K, N, opts.tA ?? false, opts.tB ?? false, 1, 0, 0, 0, false)
    return new Float32Array(buffer, pc, M * N).slice()
  } finally {
    addon.setPrecision!(before)
  }
}
