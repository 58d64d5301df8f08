/** @module Swap the last two axes, multiply with either side transposed, and sum a gradient back to a broadcast input's
 * shape. */
import * as tf from '@tensorflow/tfjs'
import { transposeIsFree } from './wasm-gemm.js'

/** [..., m, n] → [..., n, m] as a real transpose (never a matMul flag; those are slow on wasm). */
export function swapLast(x: tf.Tensor): tf.Tensor {
  const r = x.rank
  const perm = [...Array(r).keys()]
  perm[r - 1] = r - 2
  perm[r - 2] = r - 1
  return tf.transpose(x, perm)
}

/**
 * op(a)·op(b): with transpose flags where the backend reads a transposed operand in place
 * (kernels/wasm-gemm.ts), else transposing first (the stock wasm kernel runs flagged products
 * 13–35× slower than a plain one).
 */
export function matMulT(a: tf.Tensor, b: tf.Tensor, tA = false, tB = false): tf.Tensor {
  if (!tA && !tB) return tf.matMul(a, b)
  if (transposeIsFree()) return tf.matMul(a, b, tA, tB)
  return tf.matMul(tA ? swapLast(a) : a, tB ? swapLast(b) : b)
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
