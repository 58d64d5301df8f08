/**
 * @module The classifier's input matrix, `nwords + bucket` rows of `dim` floats, held sparsely:
 * the rows training changed are stored (ascending row ids and their values, as the model file
 * lays them out, so that a loaded model can view the file's bytes instead of copying them), and
 * every other row is its initial value, drawn again from the seed when it is read
 * (`init-values.ts`). With fastText's 2M hash buckets a model is then as large as what it learnt,
 * and loading it draws nothing.
 */
import { drawRow } from './init-values.js'

export class InputRows {
  /** Rows of the whole matrix (`nwords + bucket`). */
  readonly count: number
  readonly dim: number
  /** The seed the unstored rows are drawn from. */
  readonly seed: number
  /** The stored rows' ids, ascending. */
  readonly ids: Uint32Array
  /** The stored rows' values, `ids.length × dim`, in the order of `ids`. */
  readonly values: Float32Array
  /** Per row of the matrix: 1 + its place in `ids`, or 0 when it is not stored. */
  private readonly slot: Int32Array
  private readonly scratch: Float32Array

  /** `ids` must be ascending and below `count` (the model file's decoder checks a file's). */
  constructor(count: number, dim: number, seed: number, ids: Uint32Array, values: Float32Array) {
    if (values.length !== ids.length * dim)
      throw new RangeError(`input rows: ${values.length} values for ${ids.length} rows of ${dim}`)
    this.count = count
    this.dim = dim
    this.seed = seed
    this.ids = ids
    this.values = values
    this.slot = new Int32Array(count)
    for (let k = 0; k < ids.length; k++) this.slot[ids[k]!] = k + 1
    this.scratch = new Float32Array(dim)
  }

  /** Whether row `r` is stored (training changed it). */
  stored(r: number): boolean {
    return this.slot[r]! > 0
  }

  /** Row `r`'s values: a view of the stored row, or its initial values in a scratch array reused by the next call. */
  row(r: number): Float32Array {
    const s = this.slot[r]!
    const { dim } = this
    if (s > 0) return this.values.subarray((s - 1) * dim, s * dim)
    drawRow(this.seed, r, dim, this.scratch, 0)
    return this.scratch
  }

  /** `hidden` = the mean of the `n` rows listed in `rows` (summed in their order, in doubles). */
  mean(rows: Int32Array, n: number, hidden: Float64Array): void {
    const { dim, values, slot, scratch } = this
    hidden.fill(0)
    for (let k = 0; k < n; k++) {
      const r = rows[k]!
      const s = slot[r]!
      let v = values
      let off = (s - 1) * dim
      if (s === 0) {
        drawRow(this.seed, r, dim, scratch, 0)
        v = scratch
        off = 0
      }
      for (let j = 0; j < dim; j++) hidden[j]! += v[off + j]!
    }
    const inv = 1 / n
    for (let j = 0; j < dim; j++) hidden[j]! *= inv
  }
}
