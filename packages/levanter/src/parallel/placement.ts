/**
 * @module Where mesh members run: by default on the current fray client (worker processes on this
 * host), or, with `placement: { iris }`, as jobs on an iris cluster's workers (fray's iris client).
 */
import { readFileSync } from 'node:fs'
import { FrayIrisClient } from '@marin/fray'
import type { Client } from '@marin/fray'
import { LevanterError } from '../errors.js'
import type { MeshPlacement } from './mesh-config.js'

export type { MeshPlacement } from './mesh-config.js'

/** A fray client that places members as `placement` says (the caller shuts it down), or undefined for the current
 * one. */
export function placementClient(placement: MeshPlacement | undefined): Client | undefined {
  if (!placement) return undefined
  const { controller, tokenFile } = placement.iris
  let token: string | undefined
  if (tokenFile) {
    try {
      token = readFileSync(tokenFile, 'utf8').trim()
    } catch (err) {
      throw new LevanterError(
        'BAD_CONFIG',
        `trainer config: placement.iris.tokenFile ${tokenFile} cannot be read (${(err as Error).message}); ` +
          'point it at the token file of the cluster',
      )
    }
  }
  return new FrayIrisClient({ iris: { controller, ...(token ? { token } : {}) } })
}
