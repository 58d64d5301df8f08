/**
 * @module LayerNorm with its own gradient. Autodiff through mean/variance/normalize builds ~30
 * backward ops, several of them sums over the leading (batch) axes, which the wasm backend runs
 * as a transpose plus a reduction. The closed form needs half the ops; on wasm it is one loop over
 * the heap, two passes per row, gain and bias gradients included (≈10 kernels otherwise). Where
 * levanter's native kernels run (kernels/native-ops.ts) the forward pass is one kernel too.
 */
import * as tf from '@tensorflow/tfjs'
import { columnSum } from './column-sum.js'
import { nativeKernels } from './native-ops.js'
import { heapKernel, heapKernels } from './wasm-heap.js'
import { deviceLayerNorm } from '../webgpu/kernels/layer-norm.js'

type Save = (s: tf.Tensor[]) => void

function core(eps: number) {
  return tf.customGrad((...args: (tf.Tensor | Save)[]) => {
    const [x, g, b] = args as [tf.Tensor, tf.Tensor, tf.Tensor]
    const save = args[3] as Save
    const native = nativeKernels()
    const [N, D] = x.shape as [number, number]
    const outs =
      native &&
      heapKernels(
        [
          [N, D],
          [N, D],
          [N, 1],
        ],
        [x, g, b],
        ([y, xh, rs], [xv, gv, bv]) => native.layerNormForward(xv!, gv!, bv!, eps, y!, xh!, rs!),
      )
    if (native && outs) {
      const [y, xh, rs] = outs as [tf.Tensor, tf.Tensor, tf.Tensor]
      save([xh, rs, g])
      return {
        value: y,
        gradFunc: (dy: tf.Tensor | tf.Tensor[], saved: tf.Tensor[]) => {
          const grads = heapKernels([[N, D], [D], [D]], [dy as tf.Tensor, ...saved], ([dx, dg, db], [d, h, r, gv]) =>
            native.layerNormBackward(d!, h!, r!, gv!, dx!, dg!, db!),
          )
          return grads ?? closedForm(dy as tf.Tensor, saved)
        },
      }
    }
    const xc = tf.sub(x, tf.mean(x, -1, true))
    const rstd = tf.rsqrt(tf.add(tf.mean(tf.square(xc), -1, true), eps))
    const xhat = tf.mul(xc, rstd) // [N, D]
    save([xhat, rstd, g])
    return {
      value: tf.add(tf.mul(xhat, g), b),
      gradFunc: (dy: tf.Tensor | tf.Tensor[], saved: tf.Tensor[]) => {
        const d = dy as tf.Tensor
        const [xh, rs, gamma] = saved as [tf.Tensor, tf.Tensor, tf.Tensor]
        // on wasm one loop over the heap, about ten kernels otherwise
        const dgSum = new Float64Array(gamma.size),
          dbSum = new Float64Array(gamma.size)
        const dxFused = heapKernel(d.shape, [d, xh, rs, gamma], (dx, dv, xv, rv, gv) =>
          layerNormGradLoop(dv!, xv!, rv!, gv!, dx, dgSum, dbSum),
        )
        if (dxFused) return [dxFused, tf.tensor1d(Float32Array.from(dgSum)), tf.tensor1d(Float32Array.from(dbSum))]
        return closedForm(d, saved)
      },
    }
  })
}

/** dx, dgain, dbias as tensor ops, from the saved x̂, rstd and gain. */
function closedForm(d: tf.Tensor, saved: tf.Tensor[]): tf.Tensor[] {
  const [xh, rs, gamma] = saved as [tf.Tensor, tf.Tensor, tf.Tensor]
  const dg = columnSum(tf.mul(d, xh))
  const db = columnSum(d)
  // dx = rstd · (dx̂ − mean(dx̂) − x̂ · mean(dx̂ · x̂)), with dx̂ = dy · g.
  const dxh = tf.mul(d, gamma)
  const dx = tf.mul(tf.sub(tf.sub(dxh, tf.mean(dxh, -1, true)), tf.mul(xh, tf.mean(tf.mul(dxh, xh), -1, true))), rs)
  return [dx, dg, db]
}

/** dx, dgain, dbias for rows of D: two passes over each row, the parameter sums in float64. */
function layerNormGradLoop(
  d: Float32Array,
  xh: Float32Array,
  rs: Float32Array,
  g: Float32Array,
  dx: Float32Array,
  dg: Float64Array,
  db: Float64Array,
): void {
  const D = g.length,
    N = rs.length
  for (let r = 0, o = 0; r < N; r++, o += D) {
    let m1 = 0,
      m2 = 0
    for (let j = 0; j < D; j++) {
      const dj = d[o + j]!,
        xj = xh[o + j]!,
        dxh = dj * g[j]!
      m1 += dxh
      m2 += dxh * xj
      dg[j]! += dj * xj
      db[j]! += dj
    }
    m1 /= D
    m2 /= D
    const rr = rs[r]!
    for (let j = 0; j < D; j++) dx[o + j] = (d[o + j]! * g[j]! - m1 - xh[o + j]! * m2) * rr
  }
}

const cores = new Map<number, ReturnType<typeof core>>()

/** LayerNorm over the last axis of x [..., D] with gain g [D] and bias b [D]. */
export function fusedLayerNorm(x: tf.Tensor, g: tf.Tensor, b: tf.Tensor, eps: number): tf.Tensor {
  let f = cores.get(eps)
  if (!f) cores.set(eps, (f = core(eps)))
  const D = x.shape[x.rank - 1]!
  const x2 = tf.reshape(x, [-1, D])
  // on webgpu one WGSL kernel each way (webgpu/kernels/layer-norm.ts)
  return tf.reshape(deviceLayerNorm(x2, g, b, eps) ?? (f(x2, g, b) as tf.Tensor), x.shape)
}
