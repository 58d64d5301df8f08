/**
 * @module levanter's GEMM (kernels/gemm-wat.ts) instantiated over the wasm backend's own memory,
 * so it multiplies tensors where they live. The `fma` build needs WebAssembly relaxed SIMD: on by
 * default in newer Node, behind `--experimental-wasm-relaxed-simd` in Node 20, which this module
 * sets before compiling (V8 reads wasm feature flags at compile time). Where neither build
 * validates, {@link gemmFor} answers undefined and the backend's XNNPACK path stays in use.
 * Where levanter's native GEMM runs (kernels/native-gemm.ts: built at install, a CPU with AVX2/FMA)
 * it is the default, working on the same memory from outside (`native`).
 * `LEVANTER_GEMM=native|fma|simd|xnnpack` picks one (xnnpack turns these GEMMs off).
 */
import { readFileSync } from 'node:fs'
import v8 from 'node:v8'
import * as tf from '@tensorflow/tfjs'
import { LevanterError } from '../errors.js'
import { WORKSPACE_BYTES } from './gemm-wat.js'
import type { GemmArgs } from './native-addon.js'
import { nativeGemm } from './native-gemm.js'
import type { WasmBackendLike } from './wasm-heap.js'

// The WebAssembly API as far as used here (the project's type libraries do not declare it).
type WasmApi = {
  Memory: abstract new () => { buffer: ArrayBuffer }
  Module: new (bytes: Uint8Array) => object
  Instance: new (module: object, imports: object) => { exports: Record<string, unknown> }
  validate(bytes: Uint8Array): boolean
}
const WA = (globalThis as unknown as { WebAssembly: WasmApi }).WebAssembly

/** The parts of the wasm backend's emscripten module the GEMM needs. */
export type WasmModuleLike = Pick<WasmBackendLike['wasm'], 'asm' | '_malloc'>

/** The WebAssembly builds. */
export const GEMM_BUILDS = ['fma', 'simd'] as const
type WasmBuild = (typeof GEMM_BUILDS)[number]
/** Every GEMM levanter can run products on. */
export type GemmBuild = 'native' | WasmBuild
type Build = GemmBuild

/** C = op(A)·op(B) over `batch` matrices; pointers and strides in bytes, strides 0 broadcast. */
export type GemmFn = (
  a: number,
  b: number,
  c: number,
  M: number,
  K: number,
  N: number,
  tA: number,
  tB: number,
  ws: number,
  batch: number,
  sa: number,
  sb: number,
  sc: number,
) => void

export type Gemm = { readonly build: Build; readonly run: (...args: GemmArgs) => void }

const bytes = new Map<string, Uint8Array>()
/** The assembled module of one build (kept next to this file; `scripts/build-gemm.ts` writes it). */
export function gemmBytes(build: WasmBuild): Uint8Array {
  let b = bytes.get(build)
  if (!b) bytes.set(build, (b = new Uint8Array(readFileSync(new URL(`./gemm-${build}.wasm`, import.meta.url)))))
  return b
}

let relaxedTried = false
function validates(build: Build): boolean {
  if (build === 'native') return nativeGemm().addon !== undefined
  if (WA.validate(gemmBytes(build))) return true
  if (build !== 'fma' || relaxedTried) return false
  relaxedTried = true
  v8.setFlagsFromString('--experimental-wasm-relaxed-simd')
  return WA.validate(gemmBytes(build))
}

function usable(build: Build): Build {
  if (build === 'native') {
    const { reason } = nativeGemm()
    if (reason)
      throw new LevanterError(
        'BAD_CONFIG',
        `LEVANTER_GEMM=native: the native GEMM is unavailable (${reason}); ` +
          'unset LEVANTER_GEMM or pick fma, simd or xnnpack',
      )
    return build
  }
  if (!validates(build))
    throw new LevanterError(
      'BACKEND_UNAVAILABLE',
      `levanter's ${build} GEMM does not validate on this runtime ` +
        `(Node ${process.versions.node}); set LEVANTER_GEMM=simd or xnnpack`,
    )
  return build
}

const ALL = ['native', ...GEMM_BUILDS] as const

/** The build to use here: `LEVANTER_GEMM`, else the fastest that validates; undefined for none (or `xnnpack`). */
export function chooseGemmBuild(env: string | undefined = process.env.LEVANTER_GEMM): Build | undefined {
  if (env === 'xnnpack') return undefined
  if (env !== undefined && env !== '' && !(ALL as readonly string[]).includes(env)) {
    throw new LevanterError(
      'BAD_CONFIG',
      `LEVANTER_GEMM=${env} is not one of native, fma, simd, xnnpack; unset it or pick one of those`,
    )
  }
  if (env) return usable(env as Build)
  return ALL.find(validates)
}

const instances = new WeakMap<object, Map<Build, Gemm>>()
let selected: Build | null | undefined // undefined: not chosen yet; null: none (XNNPACK)

/** Use `choice` from now on (`xnnpack` turns this GEMM off; undefined goes back to `LEVANTER_GEMM`). Tests compare the
 * paths with it. */
export function selectGemm(choice: Build | 'xnnpack' | undefined): void {
  selected = choice === undefined ? undefined : choice === 'xnnpack' ? null : choice
}

/** The GEMM over `wasm`'s memory (instantiated once per backend module and build), or undefined where none runs. */
export function gemmFor(wasm: WasmModuleLike): Gemm | undefined {
  if (selected === undefined) selected = chooseGemmBuild() ?? null
  if (selected === null || !(wasm.asm?.memory instanceof WA.Memory)) return undefined
  let byBuild = instances.get(wasm)
  if (!byBuild) instances.set(wasm, (byBuild = new Map()))
  let g = byBuild.get(selected)
  if (!g && selected === 'native') {
    const addon = usable('native') && nativeGemm().addon!
    const memory = wasm.asm.memory as { buffer: ArrayBuffer }
    g = {
      build: 'native',
      // memory.buffer is read at each call: growing the heap replaces it
      run: (a, b, c, M, K, N, tA, tB, batch = 1, sa = 0, sb = 0, sc = 0) =>
        addon.gemm(memory.buffer, a, b, c, M, K, N, tA, tB, batch, sa, sb, sc, false),
    }
    byBuild.set('native', g)
  }
  if (!g) {
    const build = usable(selected) as WasmBuild
    const inst = new WA.Instance(new WA.Module(gemmBytes(build)), { env: { memory: wasm.asm.memory } })
    const fn = inst.exports.gemm as GemmFn
    const ws = wasm._malloc(WORKSPACE_BYTES)
    g = {
      build,
      run: (a, b, c, M, K, N, tA, tB, batch = 1, sa = 0, sb = 0, sc = 0) =>
        fn(a, b, c, M, K, N, tA ? 1 : 0, tB ? 1 : 0, ws, batch, sa, sb, sc),
    }
    byBuild.set(build, g)
  }
  return g
}

let kernelRegistered = false
/** kernels/register.ts says whether levanter's BatchMatMul (the one that runs this GEMM) is installed. */
export function markGemmKernel(on: boolean): void {
  kernelRegistered = on
}

/** Whether tf.matMul reads a transposed operand in place on the active backend (tensorflow; webgpu, whose matMul
 * programs index either layout; wasm with this GEMM). */
export function transposeIsFree(): boolean {
  const name = tf.getBackend()
  if (name === 'tensorflow' || name === 'webgpu') return true
  if (name !== 'wasm' || !kernelRegistered) return false
  return gemmFor((tf.backend() as unknown as WasmBackendLike).wasm) !== undefined
}
