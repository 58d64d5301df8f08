/**
 * A process for the GEMM-selection test: starts the wasm backend as a program would (LEVANTER_GEMM,
 * LEVANTER_NATIVE_DISABLE from the environment), runs one product on the chosen GEMM, and prints
 * one JSON line `{ gemm, err }`: the GEMM the backend reported and the largest error against float64.
 */
import * as tf from '@tensorflow/tfjs'
import { initBackend } from '../backend.js'

const { gemm } = await initBackend('wasm')
const [M, K, N] = [37, 300, 45]
const a = Float32Array.from({ length: M * K }, (_, i) => Math.sin(i))
const b = Float32Array.from({ length: K * N }, (_, i) => Math.cos(i))
const c = tf.matMul(tf.tensor2d(a, [M, K]), tf.tensor2d(b, [K, N])).dataSync()
let err = 0
for (let m = 0; m < M; m++) {
  for (let n = 0; n < N; n++) {
    let s = 0
    for (let k = 0; k < K; k++) s += a[m * K + k]! * b[k * N + n]!
    err = Math.max(err, Math.abs(c[m * N + n]! - s))
  }
}
process.stdout.write(`${JSON.stringify({ gemm, err })}\n`)
