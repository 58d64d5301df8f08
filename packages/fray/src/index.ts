/** @module @marin/fray: the execution runtime: actors, futures, actor groups, a device mesh and collectives, local and iris backends. */
import pkg from '../package.json' with { type: 'json' }

export const name: string = pkg.name
export const version: string = pkg.version
