/**
 * @module Named tensors as they travel to and from mesh members: plain objects, since fray's iris
 * transport carries JSON structure and typed arrays (not Maps); the local transports carry them alike.
 */

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
