/**
 * @module WebGPU adapters through Dawn (the `webgpu` package's prebuilt `dawn.node`). On Linux Dawn
 * needs the Vulkan loader (libvulkan.so.1) and a Vulkan driver: a GPU vendor's, or SwiftShader
 * (software, from {@link unpackSwiftShader}) when asked for. The loader is loaded into this process
 * for good before Dawn starts, so a loader from a folder outside the library path (the one shipped
 * with SwiftShader) serves Dawn's own `dlopen` without `LD_LIBRARY_PATH`.
 */
import { createRequire } from 'node:module'
import os from 'node:os'
import { logger } from '@marin/rigging'
import type { create } from 'webgpu' // (also brings the global GPU* types)
import { unpackSwiftShader } from './swiftshader.js'

const log = logger('levanter')

/** glibc's RTLD_NODELETE: keep a library loaded after `process.dlopen` gives up on it (it is not a Node addon). */
const RTLD_NODELETE = 0x1000

/** The adapter levanter runs on, as the log line and the run's provenance name it. */
export type GpuAdapterInfo = {
  readonly vendor: string
  readonly architecture: string
  readonly device: string
  readonly description: string
  /** A software rasterizer (SwiftShader) rather than a GPU. */
  readonly software: boolean
}

/** A Dawn instance with its adapter. */
export type FoundAdapter = { readonly gpu: GPU; readonly adapter: GPUAdapter; readonly info: GpuAdapterInfo }

type Dawn = { create: typeof create; globals: Record<string, unknown> }
let dawn: Dawn | undefined

/** The `webgpu` package, with its `GPU*` constants installed as globals (tfjs-backend-webgpu reads them there). */
export function loadDawn(): Dawn {
  if (dawn) return dawn
  const require = createRequire(import.meta.url)
  dawn = require('webgpu') as Dawn
  for (const [k, v] of Object.entries(dawn.globals)) if (!(k in globalThis)) Object.assign(globalThis, { [k]: v })
  return dawn
}

/**
 * Load the Vulkan loader into this process for good: the system's (`libvulkan.so.1` on the library
 * path) if there is one, else `fallback` (a path). Returns which one, or undefined when neither loads.
 * Not Linux: Dawn uses the platform's own API and this is a no-op ('system').
 */
export function loadVulkanLoader(fallback?: string): 'system' | string | undefined {
  if (process.platform !== 'linux') return 'system'
  const flags = os.constants.dlopen.RTLD_NOW | os.constants.dlopen.RTLD_GLOBAL | RTLD_NODELETE
  for (const [spec, answer] of [['libvulkan.so.1', 'system'], ...(fallback ? [[fallback, fallback]] : [])] as const) {
    try {
      process.dlopen({ exports: {} }, spec, flags)
      return answer // (not reached: a plain library never registers as a module)
    } catch (err) {
      // Loaded, but not a Node addon: that is the expected answer, and the library stays loaded.
      if (/did not self-register/.test((err as Error).message)) return answer
      log.debug({ err, spec }, 'vulkan loader not loadable')
    }
  }
  return undefined
}

/** What an adapter says of itself (`GPUAdapter.info`; Dawn adds `isFallbackAdapter`, true for CPU-type adapters). */
export type AdapterDescription = Pick<GPUAdapterInfo, 'vendor' | 'architecture' | 'device' | 'description'> & {
  readonly isFallbackAdapter?: boolean
}

/** Software rasterizers that present themselves as Vulkan devices. */
const SOFTWARE = /swiftshader|llvmpipe|lavapipe|softpipe/i

/** How levanter names an adapter; `software` for a fallback (CPU-type) adapter or a known software rasterizer. */
export function describeAdapter(i: AdapterDescription): GpuAdapterInfo {
  return {
    vendor: i.vendor,
    architecture: i.architecture,
    device: i.device,
    description: i.description,
    software: Boolean(i.isFallbackAdapter) || SOFTWARE.test(`${i.architecture} ${i.device} ${i.description}`),
  }
}

/** A Dawn adapter with the description it gave, before levanter classifies it. */
export type ProbedAdapter = {
  readonly gpu: GPU
  readonly adapter: GPUAdapter
  readonly description: AdapterDescription
}

/**
 * Dawn toggles for a SwiftShader device. `disable_workgroup_init`: WebGPU zero-fills a shader's workgroup memory
 * before it runs, code Dawn adds to every shader with workgroup arrays, and SwiftShader compiles that loop ~10×
 * slower than the rest: a tfjs packed matrix product took ~450 ms of CPU to compile with it, ~45 ms without. The
 * shaders levanter runs (tfjs's tiled products and reductions, levanter's row kernels) write every workgroup element
 * before reading it, so the zero fill never shows in a result (losses are the same bits either way). A GPU driver
 * zero-fills natively and keeps Dawn's default.
 */
export const SOFTWARE_DAWN_FLAGS = ['enable-dawn-features=disable_workgroup_init'] as const

async function request(flags: readonly string[] = []): Promise<ProbedAdapter | undefined> {
  const gpu = loadDawn().create([...flags])
  const adapter = await gpu.requestAdapter({ powerPreference: 'high-performance' })
  return adapter ? { gpu, adapter, description: adapter.info as AdapterDescription } : undefined
}

function found(p: ProbedAdapter): FoundAdapter {
  return { gpu: p.gpu, adapter: p.adapter, info: describeAdapter(p.description) }
}

/**
 * Dawn's preferred adapter, unclassified, where the system has a Vulkan loader; undefined, without
 * loading Dawn, where it has none (the common case on a machine without a GPU: one failed `dlopen`).
 */
export async function probeAdapter(): Promise<ProbedAdapter | undefined> {
  if (!loadVulkanLoader()) return undefined
  return request()
}

/**
 * A hardware adapter if the machine has a GPU with a Vulkan driver (or Metal/D3D elsewhere);
 * undefined otherwise (no loader, no adapter, or a software one).
 * @param probe where the adapter comes from; @default {@link probeAdapter}
 */
export async function hardwareAdapter(probe = probeAdapter): Promise<FoundAdapter | undefined> {
  const p = await probe()
  const f = p && found(p)
  return f && !f.info.software ? f : undefined
}

/** A SwiftShader adapter: the driver (and, if the system has none, the loader) unpacked from the registry package. */
export async function swiftShaderAdapter(cacheDir?: string): Promise<FoundAdapter | undefined> {
  const ss = unpackSwiftShader(cacheDir)
  process.env.VK_ICD_FILENAMES = ss.icd // read by the loader when Dawn creates its Vulkan instance
  if (!loadVulkanLoader(ss.loader)) return undefined
  const p = await request(SOFTWARE_DAWN_FLAGS)
  return p && found(p)
}
