/**
 * @module LayerNorm with its own gradient. Autodiff through mean/variance/normalize builds ~30
 * backward ops, several of them sums over the leading (batch) axes, which the wasm backend runs
 * as a transpose plus a reduction. The closed form needs half the ops, and its parameter
 * gradients are one pass over the rows (kernels/column-sum.ts) instead of a transpose and a reduction.
 */
import * as tf from '@tensorflow/tfjs'
import { columnSum } from './column-sum.js'

type Save = (s: tf.Tensor[]) => void

function core(eps: number) {
  return tf.customGrad((...args: (tf.Tensor | Save)[]) => {
    const [x, g, b] = args as [tf.Tensor, tf.Tensor, tf.Tensor]
    const save = args[3] as Save
    const xc = tf.sub(x, tf.mean(x, -1, true))
    const rstd = tf.rsqrt(tf.add(tf.mean(tf.square(xc), -1, true), eps))
    const xhat = tf.mul(xc, rstd) // [N, D]
    save([xhat, rstd, g])
    return {
      value: tf.add(tf.mul(xhat, g), b),
      gradFunc: (dy: tf.Tensor | tf.Tensor[], saved: tf.Tensor[]) => {
        const d = dy as tf.Tensor
        const [xh, rs, gamma] = saved as [tf.Tensor, tf.Tensor, tf.Tensor]
                const dg = columnSum(tf.mul(d, xh))
        const db = columnSum(d)
        // dx = rstd · (dx̂ − mean(dx̂) − x̂ · mean(dx̂ · x̂)), with dx̂ = dy · g.
        const dxh = tf.mul(d, gamma)
        const dx = tf.mul(tf.sub(tf.sub(dxh, tf.mean(dxh, -1, true)), tf.mul(xh, tf.mean(tf.mul(dxh, xh), -1, true))), rs)
        return [dx, dg, db]
      },
    }
  })
}

const cores = new Map<number, ReturnType<typeof core>>()

/** LayerNorm over the last axis of x [..., D] with gain g [D] and bias b [D]. */
export function fusedLayerNorm(x: tf.Tensor, g: tf.Tensor, b: tf.Tensor, eps: number): tf.Tensor {
  let f = cores.get(eps)
  if (!f) cores.set(eps, (f = core(eps)))
  const D = x.shape[x.rank - 1]!
  return tf.reshape(f(tf.reshape(x, [-1, D]), g, b) as tf.Tensor, x.shape)
}
