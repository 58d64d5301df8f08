/**
 * @module BatchMatMul gradient with explicit transposes. The stock gradient multiplies with
 * `transposeA`/`transposeB` set, which the wasm backend runs 13–35× slower than a plain matMul;
 * transposing first and multiplying plainly gives the same numbers, fast.
 */
import * as tf from '@tensorflow/tfjs'
import type { GradConfig, NamedAttrMap, Tensor } from '@tensorflow/tfjs'
import { swapLast, unbroadcast } from './transpose-last.js'

export const batchMatMulGrad: GradConfig = {
  kernelName: 'BatchMatMul',
  inputsToSave: ['a', 'b'],
  gradFunc: (dy: Tensor | Tensor[], saved: Tensor[], attrs: NamedAttrMap) => {
    const g = dy as Tensor
    const [a, b] = saved as [Tensor, Tensor]
    const tA = Boolean(attrs.transposeA), tB = Boolean(attrs.transposeB)
    const mm = (x: Tensor, y: Tensor): Tensor => tf.matMul(x, y)
    return {
      a: () => {
        // c = op(a)·op(b); da follows from which side was transposed.
        const da = !tA && !tB ? mm(g, swapLast(b)) : !tA && tB ? mm(g, b) : tA && !tB ? mm(b, swapLast(g)) : mm(swapLast(b), swapLast(g))
        return unbroadcast(da, a.shape)
      },
      b: () => {
        const db = !tA && !tB ? mm(swapLast(a), g) : !tA && tB ? mm(swapLast(g), a) : tA && !tB ? mm(a, g) : mm(swapLast(g), swapLast(a))
        return unbroadcast(db, b.shape)
      },
    }
  },
}
