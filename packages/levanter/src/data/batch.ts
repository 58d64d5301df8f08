/** @module A batch as plain data: token rows, their next-token targets and the loss mask. */

/** `inputs`/`targets`/`mask` are row-major [batchSize, seqLen]. */
export type Batch = {
  readonly inputs: Int32Array
  readonly targets: Int32Array
  readonly mask: Float32Array
  readonly batchSize: number
  readonly seqLen: number
}

/** Rows [from, to) of a batch (microbatches, replica slices). */
export function sliceBatch(b: Batch, from: number, to: number): Batch {
  const T = b.seqLen
  return {
    inputs: b.inputs.subarray(from * T, to * T),
    targets: b.targets.subarray(from * T, to * T),
    mask: b.mask.subarray(from * T, to * T),
    batchSize: to - from,
    seqLen: T,
  }
}

/** Σ mask: the number of predicted tokens. */
export function maskCount(b: Batch): number {
  let s = 0
  for (const m of b.mask) s += m
  return s
}
