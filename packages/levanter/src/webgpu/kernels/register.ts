/**
 * @module levanter's WGSL kernels for the tfjs webgpu backend (src/webgpu/kernels/), registered
 * under their own kernel names beside the backend's: the models and the device AdamW ask for them
 * by name on the current backend and compose tensor ops where it lacks them.
 */
import * as tf from '@tensorflow/tfjs'
import type { KernelConfig } from '@tensorflow/tfjs'
import { ADAMW_KERNELS } from './adamw.js'
import { COLUMN_SUM_KERNELS } from './column-sum.js'
import { LAYER_NORM_KERNELS } from './layer-norm.js'
import { SOFTMAX_KERNELS } from './softmax.js'

export const WEBGPU_KERNELS: readonly KernelConfig[] = [
  ...ADAMW_KERNELS,
  ...SOFTMAX_KERNELS,
  ...LAYER_NORM_KERNELS,
  ...COLUMN_SUM_KERNELS,
]

/** Register the WGSL kernels for 'webgpu' (whether or not that backend runs here; idempotent). */
export function registerWebGpuKernels(): void {
  for (const k of WEBGPU_KERNELS) if (!tf.getKernel(k.kernelName, k.backendName)) tf.registerKernel(k)
}

/** Remove them (the composite ops run instead). */
export function unregisterWebGpuKernels(): void {
  for (const k of WEBGPU_KERNELS)
    if (tf.getKernel(k.kernelName, k.backendName)) tf.unregisterKernel(k.kernelName, k.backendName)
}
