/** @module @marin/iris: job orchestration: controller, workers, scheduler, job states and retries, logs, the iris CLI and a local cluster. */
import pkg from '../package.json' with { type: 'json' }

export const name: string = pkg.name
export const version: string = pkg.version
