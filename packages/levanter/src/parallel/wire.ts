/**
 * @module Named tensors and batch rows as they travel to and from mesh members: plain objects, since fray's iris
 * transport carries JSON structure and typed arrays (not Maps); the local transports carry them alike.
 */
import { sliceBatch } from '../data/batch.js'
import type { Batch } from '../data/batch.js'

/** Weights and moments by name, and the update count, as a member receives or returns them. */
export type WireTensors = {
  readonly weights: Readonly<Record<string, Float32Array>>
  readonly optimizer: Readonly<Record<string, Float32Array>>
  readonly count: number
}

type Named = {
  readonly weights: ReadonlyMap<string, Float32Array>
  readonly optimizer: ReadonlyMap<string, Float32Array>
  readonly count: number
}

export const toWire = (t: Named): WireTensors => ({
  weights: Object.fromEntries(t.weights),
  optimizer: Object.fromEntries(t.optimizer),
  count: t.count,
})

export const fromWire = (
  w: WireTensors,
): { weights: Map<string, Float32Array>; optimizer: Map<string, Float32Array>; count: number } => ({
  weights: new Map(Object.entries(w.weights)),
  optimizer: new Map(Object.entries(w.optimizer)),
  count: w.count,
})

/** Rows from…to of a batch as copies, so structured clone sends only those rows' bytes, not the whole
 * batch's buffer. */
export function copyRows(b: Batch, from: number, to: number): Batch {
  const s = sliceBatch(b, from, to)
  return { ...s, inputs: s.inputs.slice(), targets: s.targets.slice(), mask: s.mask.slice() }
}
