/**
 * A process for the GEMM-selection test: starts the wasm backend as a program would (LEVANTER_GEMM,
 * LEVANTER_NATIVE_DISABLE from the environment), runs one product on the chosen GEMM and one small
 * GPT-2 gradient, and prints one JSON line `{ gemm, err, fused, loss, gradNorm }`: the GEMM the
 * backend reported, the product's largest error against float64, whether the fused native kernels
 * ran, and the gradient's loss and norm.
 */
import * as tf from '@tensorflow/tfjs'
import { initBackend } from '../backend.js'
import { nativeKernels } from '../kernels/native-ops.js'
import { maskedCrossEntropy } from '../loss.js'
import { Gpt2LM } from '../models/lm.js'
import { globalNorm } from '../optim/adamw.js'

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
const model = new Gpt2LM({ vocabSize: 37, seqLen: 12, dModel: 16, nLayers: 2, nHeads: 2 }, 3)
const ids = tf.tensor2d(
  Array.from({ length: 24 }, (_, i) => (i * 5) % 37),
  [2, 12],
  'int32',
)
const targets = tf.tensor2d(
  Array.from({ length: 24 }, (_, i) => (i * 3 + 1) % 37),
  [2, 12],
  'int32',
)
const { value, grads } = tf.variableGrads(
  () => maskedCrossEntropy(model.forward(ids), targets, tf.ones([2, 12])),
  [...model.params.values()],
)
const fused = nativeKernels() !== undefined
const result = { gemm, err, fused, loss: value.dataSync()[0], gradNorm: globalNorm(Object.values(grads)) }
process.stdout.write(`${JSON.stringify(result)}\n`)
