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

/** {@link measuredPeakFlops} on any backend: on a device backend (whose reads are asynchronous) products are timed
 * through `await data()`, 256³ and, when that is fast (a GPU rather than a software adapter), 1024³, for a figure
 * nearer a GPU's throughput. */
export async function measurePeakFlops(): Promise<number> {
  const name = tf.getBackend()
  if (name !== 'webgpu' && name !== 'tensorflow') return measuredPeakFlops()
  if (peak !== undefined) return peak
  const bestOf = async (n: number, runs: number): Promise<number> => {
    const a = tf.ones([n, n]),
      b = tf.ones([n, n])
    let best = Infinity
    for (let i = 0; i <= runs; i++) {
      const t = performance.now()
      const c = tf.matMul(a, b)
      await c.data()
      c.dispose()
      if (i > 0) best = Math.min(best, (performance.now() - t) / 1000) // the first run compiles
    }
    tf.dispose([a, b])
    return best
  }
  let n = 256
  let best = await bestOf(n, 2)
  if (best < 0.01) best = await bestOf((n = 1024), 3)
  peak = (2 * n * n * n) / Math.max(best, 1e-6)
  return peak
}
