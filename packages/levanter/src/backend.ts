/**
 * @module Tensor backend selection: `tensorflow` (tfjs-node-gpu, then tfjs-node, optional peers),
 * else `webgpu` on a hardware GPU adapter (Dawn over Vulkan), else `wasm` (levanter's CPU kernels,
 * XNNPACK, SIMD), else `cpu`. A software adapter (SwiftShader, from the registry) runs only when
 * asked: `LEVANTER_BACKEND` overrides the order. A process that reads tensors synchronously says
 * so and never gets webgpu; mesh members (plain data parallel included) read asynchronously and
 * follow a webgpu driver there.
 */
import { createRequire } from 'node:module'
import path from 'node:path'
import * as tf from '@tensorflow/tfjs'
import { logger } from '@marin/rigging'
import { LevanterError } from './errors.js'
import { registerLevanterKernels } from './kernels/register.js'
import { nativeGemm, threadCount } from './kernels/native-gemm.js'
import { chooseGemmBuild } from './kernels/wasm-gemm.js'
import { hardwareAdapter, swiftShaderAdapter } from './webgpu/adapter.js'
import type { GpuAdapterInfo, ProbedAdapter } from './webgpu/adapter.js'
import { startWebGpuBackend } from './webgpu/backend.js'

const log = logger('levanter')

export const BACKEND_NAMES = ['tensorflow', 'webgpu', 'wasm', 'cpu'] as const
export type BackendName = (typeof BACKEND_NAMES)[number]

/** What {@link initBackend} chose. */
export type BackendInfo = {
  readonly name: BackendName
  /** Threads the backend computes with (1 for single-threaded wasm and cpu). */
  readonly threads: number
  /** Whether the wasm backend runs its SIMD build. */
  readonly simd: boolean
  /** On wasm, what runs matrix products: levanter's GEMM (`native` AVX2/FMA addon, kernels/native-gemm.ts, or the `fma`
   * or `simd` WebAssembly build, kernels/wasm-gemm.ts) or the backend's XNNPACK. */
  readonly gemm?: 'native' | 'fma' | 'simd' | 'xnnpack'
  /** With the `native` GEMM: its micro-kernel, and the threads of it and of the fused native kernels
   * (kernels/native-ops.ts). */
  readonly native?: { readonly isa: 'avx2' | 'avx512'; readonly threads: number }
  /** On webgpu, the adapter (vendor, architecture, device; `software` for SwiftShader). */
  readonly adapter?: GpuAdapterInfo
}

/** Whether tensors live on an accelerator (host reads are costly, and on webgpu asynchronous only). */
export function isDeviceBackend(name: string = tf.getBackend()): boolean {
  return name === 'webgpu' || name === 'tensorflow'
}

/** One candidate in the selection order; `software` admits a software GPU adapter. */
export type BackendCandidate = { readonly name: BackendName; readonly software: boolean }

/** How a process selects its backend. */
export type BackendOptions = {
  /** Where the default order looks for a hardware GPU adapter (classified by its description); @default Dawn's
   * preferred adapter where the system has a Vulkan loader (webgpu/adapter.ts). */
  readonly probeAdapter?: () => Promise<ProbedAdapter | undefined>
}

let chosen: Promise<BackendInfo> | undefined

// Optional peers are loaded by a computed specifier so that bundlers and tsc never require them.
async function importOptional(spec: string): Promise<unknown> {
  return import(/* @vite-ignore */ spec)
}

async function tryTensorflow(): Promise<BackendInfo | undefined> {
  for (const spec of ['@tensorflow/tfjs-node-gpu', '@tensorflow/tfjs-node']) {
    try {
      await importOptional(spec) // registers the 'tensorflow' backend as a side effect
      if (await tf.setBackend('tensorflow')) return { name: 'tensorflow', threads: 0, simd: false }
    } catch (err) {
      log.debug({ err, spec }, 'tensorflow backend not loadable')
    }
  }
  return undefined
}

async function tryWebGpu(software: boolean, o: BackendOptions): Promise<BackendInfo | undefined> {
  try {
    const t0 = performance.now()
    const found = (await hardwareAdapter(o.probeAdapter)) ?? (software ? await swiftShaderAdapter() : undefined)
    if (!found) log.debug({ ms: performance.now() - t0 }, 'no hardware GPU adapter')
    if (!found || !(await startWebGpuBackend(found))) return undefined
    await tf.ready()
    return { name: 'webgpu', threads: 0, simd: false, adapter: found.info }
  } catch (err) {
    if (software) throw err // asked for by name: say why not
    log.debug({ err }, 'webgpu backend not loadable')
    return undefined
  }
}

async function tryWasm(): Promise<BackendInfo | undefined> {
  try {
    const wasm = await import('@tensorflow/tfjs-backend-wasm')
    // In Node the backend cannot locate its .wasm files next to a bundle: point it at the package's dist.
    const require = createRequire(import.meta.url)
    const dist =
      path.join(path.dirname(require.resolve('@tensorflow/tfjs-backend-wasm/package.json')), 'dist') + path.sep
    wasm.setWasmPaths(dist)
    if (!(await tf.setBackend('wasm'))) return undefined
    await tf.ready()
    const simd = Boolean(await tf.env().getAsync('WASM_HAS_SIMD_SUPPORT'))
    return { name: 'wasm', threads: wasm.getThreadsCount(), simd }
  } catch (err) {
    log.debug({ err }, 'wasm backend not loadable')
    return undefined
  }
}

async function tryCpu(): Promise<BackendInfo | undefined> {
  return (await tf.setBackend('cpu')) ? { name: 'cpu', threads: 1, simd: false } : undefined
}

const TRY: Record<BackendName, (software: boolean, o: BackendOptions) => Promise<BackendInfo | undefined>> = {
  tensorflow: tryTensorflow,
  webgpu: tryWebGpu,
  wasm: tryWasm,
  cpu: tryCpu,
}

/** The candidates {@link initBackend} tries, in order, for a `LEVANTER_BACKEND` value (unchecked). By default webgpu
 * only on a hardware adapter (`software: false`). */
export function backendOrder(prefer: string | undefined): BackendCandidate[] {
  if (prefer === undefined || prefer === '') return BACKEND_NAMES.map((name) => ({ name, software: false }))
  return [{ name: prefer as BackendName, software: prefer === 'webgpu' }]
}

/**
 * Pick and initialize the tensor backend once per process, register levanter's kernels and
 * gradients, and log the choice. Later calls return the first answer.
 * @param prefer a backend name; @default process.env.LEVANTER_BACKEND, else tensorflow → webgpu on a hardware adapter
 * → wasm → cpu
 */
export function initBackend(
  prefer: string | undefined = process.env.LEVANTER_BACKEND,
  o: BackendOptions = {},
): Promise<BackendInfo> {
  chosen ??= (async () => {
    tf.env().set('IS_NODE', true)
    tf.env().set('PROD', true) // no per-op NaN checks or deprecation chatter
    if (prefer !== undefined && prefer !== '' && !(BACKEND_NAMES as readonly string[]).includes(prefer)) {
      throw new LevanterError(
        'BACKEND_UNAVAILABLE',
        `LEVANTER_BACKEND=${prefer} is not one of ${BACKEND_NAMES.join(', ')}; unset it or pick one of those`,
      )
    }
    const order = backendOrder(prefer)
    for (const { name, software } of order) {
      let info = await TRY[name](software, o)
      if (info) {
        // a bad LEVANTER_GEMM fails here, by name
        if (info.name === 'wasm') info = { ...info, gemm: chooseGemmBuild() ?? 'xnnpack' }
        const addon = info.gemm === 'native' ? nativeGemm().addon : undefined
        if (addon) info = { ...info, native: { isa: addon.setIsa(), threads: threadCount() } }
        // say once why the native kernels do not run where they could have
        if (info.name === 'wasm' && !addon)
          log.info({ reason: nativeGemm().reason ?? `LEVANTER_GEMM=${info.gemm}` }, 'native kernels off')
        registerLevanterKernels()
        log.info(info, 'tensor backend selected')
        return info
      }
    }
    throw new LevanterError(
      'BACKEND_UNAVAILABLE',
      `backend ${order.map((c) => c.name).join(', ')} could not be initialized; ` +
        `unset LEVANTER_BACKEND or install the backend's package`,
    )
  })()
  chosen.catch(() => {
    chosen = undefined // a failed choice may be retried with another preference
  })
  return chosen
}
