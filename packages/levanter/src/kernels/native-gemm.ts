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

/** native/gemm-impl.h's blocking and the tiles of its AVX2 and AVX-512 kernels (tests aim their edge cases at them). */
export const NATIVE_BLOCKING = { MR: 6, NR: 16, MR512: 12, NR512: 32, KC: 256, MC: 144, NC: 2048 } as const

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
