/**
 * @module GatherV2 gradient as a scatter-add. The stock gradient needs `UnsortedSegmentSum`,
 * which the wasm backend lacks; an embedding lookup (axis 0, no batch dims) is the case that
 * matters, and its gradient is a plain O(N·D) accumulation into the table's rows.
 */
import * as tf from '@tensorflow/tfjs'
import type { GradConfig, GradFunc, NamedAttrMap, Tensor } from '@tensorflow/tfjs'

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
      return {
        x: () => scatterAddRows(dy as Tensor, indices, x.shape[0]!, x.shape.slice(1)),
        indices: () => tf.zerosLike(indices).toFloat(),
      }
    },
  }
}
