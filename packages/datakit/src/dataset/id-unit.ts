/** @module The seeded id hash that sampling and splits rank documents by. */
import { createHash } from 'node:crypto'

/** A number in [0, 1) fixed by (id, seed). */
export function idUnit(id: string, seed: number): number {
  const d = createHash('sha256').update(`${seed}\u0000${id}`).digest()
  return (d.readUInt32BE(0) * 2 ** 21 + (d.readUInt32BE(4) >>> 11)) / 2 ** 53
}
