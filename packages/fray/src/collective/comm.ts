/** @module A communicator: the members of one mesh sub-group, in rank order, and its operation counter. */
import type { Peers } from './peers.js'
import type { ScratchPool } from './scratch.js'

export type Comm = {
  readonly peers: Peers
  /** Global ranks of the sub-group's members, ascending. */
  readonly ranks: readonly number[]
  /** This member's position in `ranks`. */
  readonly me: number
  /** Identifies the sub-group on the wire. */
  readonly id: number
  /** Receive buffers reused across operations. */
  readonly scratch: ScratchPool
  /** Operations so far: every member calls collectives in the same order, so sequence numbers agree. */
  seq: number
}

export const KIND = { reduceScatter: 1, allGather: 2, broadcast: 3 } as const

/** Default chunk: 1 MiB of payload per frame, so reduction overlaps the transfer of the next chunk. */
export const DEFAULT_CHUNK_BYTES = 1 << 20
