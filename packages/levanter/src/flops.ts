/** @module Peak FLOP/s of this process's backend, measured once with a dense matMul (the denominator of MFU). */
import * as tf from '@tensorflow/tfjs'

let peak: number | undefined

/** Best of ten 256×512·512×512 matMuls (~3 ms each), in FLOP/s: enough calls for V8 to have tiered a wasm GEMM up to
 * its optimized code. */
export function measuredPeakFlops(): number {
  if (peak !== undefined) return peak
  const n = 512,
    m = 256
  peak = tf.tidy(() => {
    const a = tf.ones([m, n]),
      b = tf.ones([n, n])
    tf.matMul(a, b).dataSync()
    let best = Infinity
    for (let i = 0; i < 10; i++) {
      const t = performance.now()
      tf.matMul(a, b).dataSync()
      best = Math.min(best, (performance.now() - t) / 1000)
    }
    return (2 * m * n * n) / Math.max(best, 1e-6)
  })
  return peak
}
