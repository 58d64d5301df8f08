/** @module @marin/ducky: typed RPC over gRPC: zod-validated service definitions, deadlines, retries, bearer auth, streaming and TCP tunnels. */
import pkg from '../package.json' with { type: 'json' }

export const name: string = pkg.name
export const version: string = pkg.version
