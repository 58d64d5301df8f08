/** @module Swap the last two axes, and sum a gradient back to a broadcast input's shape. */
import * as tf from '@tensorflow/tfjs'

/** [..., m, n] → [..., n, m] as a real transpose (never a matMul flag; those are slow on wasm). */
export function swapLast(x: tf.Tensor): tf.Tensor {
  const r = x.rank
  const perm = [...Array(r).keys()]
  perm[r - 1] = r - 2
  perm[r - 2] = r - 1
  return tf.transpose(x, perm)
}

/** Sum `g` over the leading axes that broadcasting added or expanded, so it has `shape`. */
export function unbroadcast(g: tf.Tensor, shape: readonly number[]): tf.Tensor {
  if (g.shape.length === shape.length && g.shape.every((d, i) => d === shape[i])) return g
  const lead = g.rank - shape.length
  const axes: number[] = []
  for (let i = 0; i < g.rank; i++) {
    if (i < lead) axes.push(i)
    else if (shape[i - lead] === 1 && g.shape[i] !== 1) axes.push(i)
  }
  return tf.reshape(axes.length ? tf.sum(g, axes) : g, [...shape])
}
