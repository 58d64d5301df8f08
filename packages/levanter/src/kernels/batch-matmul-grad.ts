/**
 * @module BatchMatMul gradient through {@link matMulT}. The stock gradient multiplies with
 * `transposeA`/`transposeB` set, which the stock wasm kernel runs 13–35× slower than a plain
 * matMul; matMulT keeps the flags only where the backend reads transposes in place, and
 * otherwise transposes first, which gives the same numbers, fast.
 */
import type { GradConfig, NamedAttrMap, Tensor } from '@tensorflow/tfjs'
import { matMulT, unbroadcast } from './transpose-last.js'

export const batchMatMulGrad: GradConfig = {
  kernelName: 'BatchMatMul',
  inputsToSave: ['a', 'b'],
  gradFunc: (dy: Tensor | Tensor[], saved: Tensor[], attrs: NamedAttrMap) => {
    const g = dy as Tensor
    const [a, b] = saved as [Tensor, Tensor]
    const tA = Boolean(attrs.transposeA),
      tB = Boolean(attrs.transposeB)
    return {
      a: () => {
        // c = op(a)·op(b); da follows from which side was transposed.
        const da =
          !tA && !tB
            ? matMulT(g, b, false, true)
            : !tA && tB
              ? matMulT(g, b)
              : tA && !tB
                ? matMulT(b, g, false, true)
                : matMulT(b, g, true, true)
        return unbroadcast(da, a.shape)
      },
      b: () => {
        const db =
          !tA && !tB
            ? matMulT(a, g, true, false)
            : !tA && tB
              ? matMulT(g, a, true, false)
              : tA && !tB
                ? matMulT(a, g)
                : matMulT(g, a, true, true)
        return unbroadcast(db, b.shape)
      },
    }
  },
}
