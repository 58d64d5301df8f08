/** @module @marin/levanter: training on tfjs: models, optimizers, Trainer, Pipeline, checkpoints, data-parallel over fray, generation. */
import pkg from '../package.json' with { type: 'json' }

export const name: string = pkg.name
export const version: string = pkg.version

// Backend and kernels
export { BACKEND_NAMES, initBackend } from './backend.js'
export type { BackendInfo, BackendName } from './backend.js'
export { registerLevanterKernels, unregisterLevanterKernels } from './kernels/register.js'

// Errors
export { LEVANTER_ERROR_CODES, LevanterError, isLevanterError } from './errors.js'
export type { LevanterErrorCode } from './errors.js'
