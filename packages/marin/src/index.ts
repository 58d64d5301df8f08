/** @module @marin/marin: experiments and the executor, evaluation, an OpenAI-compatible server, reports and the marin CLI. */
import pkg from '../package.json' with { type: 'json' }

export const name: string = pkg.name
export const version: string = pkg.version
