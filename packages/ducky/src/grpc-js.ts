/**
 * @module @grpc/grpc-js, required at first use: its 66 modules load when a client, server or credentials
 * are first made, not when a package that depends on ducky is imported (most of iris, fray and levanter's
 * processes make no RPC). The package is CommonJS, so `require` gives the same module `import` would.
 */
import { createRequire } from 'node:module'
import type * as Grpc from '@grpc/grpc-js'

let loaded: typeof Grpc | undefined

/** grpc-js's exports. */
export function grpcJs(): typeof Grpc {
  loaded ??= createRequire(import.meta.url)('@grpc/grpc-js') as typeof Grpc
  return loaded
}
