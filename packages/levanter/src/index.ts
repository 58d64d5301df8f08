/** @module @marin/levanter: training on tfjs: models, optimizers, Trainer, Pipeline, checkpoints, data-parallel over fray, generation. */
import pkg from '../package.json' with { type: 'json' }

export const name: string = pkg.name
export const version: string = pkg.version
