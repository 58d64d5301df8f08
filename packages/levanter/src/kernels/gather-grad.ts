/**
 * @module GatherV2 gradient as a scatter-add. The stock gradient needs `UnsortedSegmentSum`,
 * which the wasm backend lacks; an embedding lookup (axis 0, no batch dims) is the case that
 * matters, and its gradient is a plain O(N·D) accumulation into the table's rows. Where the table
 * already has a gradient (a head tied to the embedding), the backward pass adds the rows straight
 * into it ({@link ScatterInto}) instead of building the dense [V, D] scatter and adding it.
 */
import * as tf from '@tensorflow/tfjs'
import type { GradConfig, GradFunc, NamedAttrMap, Tensor } from '@tensorflow/tfjs'
import { heapFloats, writableHeapFloats } from './wasm-heap.js'

/**
 * A gradient closure that can also add its rows into `target` (the input's gradient so far) in
 * place: answers false, changing nothing, where it cannot (not on the wasm heap, or `target`'s
 * buffer shared). The result is the same bits as `tf.add(target, closure())`.
 */
export type ScatterInto = (() => Tensor) & { scatterInto(target: Tensor): boolean }

/** Σ over rows: out[idx[n], :] += dy[n, :], for idx of any shape and dy = [...idx.shape, D]. */
export function scatterAddRows(dy: Tensor, indices: Tensor, numRows: number, rowShape: readonly number[]): Tensor {
  const d = rowShape.reduce((p, q) => p * q, 1)
  const idx = indices.dataSync()
  const src = dy.dataSync() as Float32Array
  const out = new Float32Array(numRows * d)
  for (let n = 0; n < idx.length; n++) {
    const row = idx[n]!
    if (row < 0 || row >= numRows) continue // out-of-range ids contribute nothing, as in the stock op
    const o = row * d,
      s = n * d
    for (let j = 0; j < d; j++) out[o + j]! += src[s + j]!
  }
  return tf.tensor(out, [numRows, ...rowShape], 'float32')
}

/**
 * target[idx[n], :] += Σ dy[n, :] in place, each row's contributions summed from zero in n order
 * first (as {@link scatterAddRows} sums them) and then added to the row: the bits of
 * `target + scatterAddRows(...)`. Rows no index names keep their values (x + 0 = x, and a product's
 * gradient is never −0). False, changing nothing, where `target` or `dy` is not on the wasm heap or
 * `target`'s buffer is shared.
 */
export function scatterAddRowsInto(target: Tensor, dy: Tensor, indices: Tensor, numRows: number, d: number): boolean {
  if (target.dtype !== 'float32' || target.size !== numRows * d || dy.size !== indices.size * d) return false
  const backend = tf.backend()
  if (!heapFloats(dy, backend)) return false
  const out = writableHeapFloats(target, backend)
  if (!out) return false
  const idx = indices.dataSync()
  const src = heapFloats(dy, backend)!
  const slot = new Map<number, number>()
  for (const row of idx) if (row >= 0 && row < numRows && !slot.has(row)) slot.set(row, slot.size)
  const sums = new Float32Array(slot.size * d)
  for (let n = 0; n < idx.length; n++) {
    const k = slot.get(idx[n]!)
    if (k === undefined) continue // out-of-range ids contribute nothing, as in the stock op
    const o = k * d,
      s = n * d
    for (let j = 0; j < d; j++) sums[o + j]! += src[s + j]!
  }
  const t = out.data
  for (const [row, k] of slot) {
    const o = row * d,
      s = k * d
    for (let j = 0; j < d; j++) t[o + j]! += sums[s + j]!
  }
  out.written()
  return true
}

/** Wrap the stock gradient: take over axis-0 lookups on the CPU backends, defer otherwise (tensorflow, and webgpu,
 * whose tensors cannot be read synchronously). */
export function gatherGrad(stock: GradFunc | undefined): GradConfig {
  return {
    kernelName: 'GatherV2',
    inputsToSave: ['x', 'indices'],
    gradFunc: (dy: Tensor | Tensor[], saved: Tensor[], attrs: NamedAttrMap) => {
      const [x, indices] = saved as [Tensor, Tensor]
      const axis = Number(attrs.axis ?? 0),
        batchDims = Number(attrs.batchDims ?? 0)
      const parsedAxis = axis < 0 ? axis + x.rank : axis
      if (
        (parsedAxis !== 0 || batchDims !== 0 || tf.getBackend() === 'tensorflow' || tf.getBackend() === 'webgpu') &&
        stock
      )
        return stock(dy, saved, attrs)
      const numRows = x.shape[0]!,
        rowShape = x.shape.slice(1)
      const scatter: ScatterInto = Object.assign(() => scatterAddRows(dy as Tensor, indices, numRows, rowShape), {
        scatterInto: (target: Tensor) =>
          scatterAddRowsInto(
            target,
            dy as Tensor,
            indices,
            numRows,
            rowShape.reduce((p, q) => p * q, 1),
          ),
      })
      return {
        x: scatter,
        indices: () => tf.zerosLike(indices).toFloat(),
      }
    },
  }
}
