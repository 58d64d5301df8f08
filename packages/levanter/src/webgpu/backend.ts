/**
 * @module The tfjs `webgpu` backend on a Dawn adapter. tfjs-backend-webgpu's own factory asks
 * `navigator.gpu`, which Node lacks; this one hands it the adapter levanter found. Reads back to
 * the host are asynchronous only (`await tensor.data()`): Node has no OffscreenCanvas, through
 * which the backend would read synchronously, so a synchronous read fails with a clear error.
 */
import { createRequire } from 'node:module'
import * as tf from '@tensorflow/tfjs'
import { LevanterError } from '../errors.js'
import type { FoundAdapter } from './adapter.js'

type WebGpuModule = { WebGPUBackend: new (device: GPUDevice, info: GPUAdapterInfo) => tf.KernelBackend }
type TensorMap = { get(id: object): { values?: unknown; dtype?: string } | undefined }

/** tfjs-backend-webgpu's `MatMulProgramType.MatMulPackedProgram` (its `WEBGPU_MATMUL_PROGRAM_TYPE` flag). */
const MATMUL_PACKED = 3

/** Limits tfjs-backend-webgpu asks for: the adapter's own, so large tensors fit. */
function requiredLimits(a: GPUAdapter): Record<string, number> {
  const l = a.limits
  return {
    maxComputeWorkgroupStorageSize: l.maxComputeWorkgroupStorageSize,
    maxComputeWorkgroupsPerDimension: l.maxComputeWorkgroupsPerDimension,
    maxStorageBufferBindingSize: l.maxStorageBufferBindingSize,
    maxBufferSize: l.maxBufferSize,
    maxComputeWorkgroupSizeX: l.maxComputeWorkgroupSizeX,
    maxComputeInvocationsPerWorkgroup: l.maxComputeInvocationsPerWorkgroup,
    maxStorageBuffersPerShaderStage: l.maxStorageBuffersPerShaderStage,
  }
}

/** Register the `webgpu` tfjs backend over `found` (replacing any earlier registration) and switch to it. */
export async function startWebGpuBackend(found: FoundAdapter): Promise<boolean> {
  const { adapter, gpu } = found
  // Loaded before navigator.gpu exists, the package registers no factory of its own (it would ask
  // navigator.gpu for an adapter); the kernels it registers are the backend.
  const require = createRequire(import.meta.url)
  const { WebGPUBackend } = require('@tensorflow/tfjs-backend-webgpu') as WebGpuModule
  // The backend's constructor checks navigator.gpu; Node 20 has no navigator.
  const nav = (globalThis as { navigator?: { gpu?: GPU } }).navigator
  if (!nav) Object.defineProperty(globalThis, 'navigator', { value: { gpu }, configurable: true, writable: true })
  else if (!nav.gpu) Object.defineProperty(nav, 'gpu', { value: gpu, configurable: true })
  const features: GPUFeatureName[] = adapter.features.has('timestamp-query') ? ['timestamp-query'] : []
  const device = await adapter.requestDevice({ requiredFeatures: features, requiredLimits: requiredLimits(adapter) })
  // On a software adapter, the matrix products tfjs-webgpu picks for small outputs (one workgroup reducing each output
  // element across 256 threads) run ~100× slower than its packed tiled product (SwiftShader switches threads at every
  // barrier): a [16, 8]·[8, 8] product took ~90 ms of CPU against ~2 ms. A GPU keeps tfjs's choice.
  if (found.info.software) tf.env().set('WEBGPU_MATMUL_PROGRAM_TYPE', MATMUL_PACKED)
  if ('webgpu' in (tf.engine() as unknown as { registryFactory: object }).registryFactory) tf.removeBackend('webgpu')
  tf.registerBackend('webgpu', () => {
    const b = new WebGPUBackend(device, adapter.info)
    const map = (b as unknown as { tensorMap: TensorMap }).tensorMap
    b.readSync = (dataId: object) => {
      const d = map.get(dataId)
      if (d?.values != null) return d.values as tf.backend_util.BackendValues
      throw new LevanterError(
        'BACKEND_UNAVAILABLE',
        'webgpu: a synchronous read (dataSync/arraySync) of a tensor on the GPU is not possible in Node; ' +
          'read it with await tensor.data(), or run this code on the wasm backend',
      )
    }
    return b
  })
  return tf.setBackend('webgpu')
}
