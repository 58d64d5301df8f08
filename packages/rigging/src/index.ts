/** @module @marin/rigging: config loading (zod), the root pino logger, secrets, telemetry, storage URLs, atomic writes, leases and provenance. */
import pkg from '../package.json' with { type: 'json' }

export const name: string = pkg.name
export const version: string = pkg.version
