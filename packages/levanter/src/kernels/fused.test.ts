import * as tf from '@tensorflow/tfjs'
import { beforeAll, describe, expect, test } from 'vitest'
import { initBackend } from '../backend.js'
import { fusedGeluTanh } from './gelu.js'
import { fusedLayerNorm } from './layer-norm.js'

/** The plain formulas, differentiated by tfjs (the reference). */
const plainLayerNorm = (x: tf.Tensor, g: tf.Tensor, b: tf.Tensor, eps: number) => {
  const { mean, variance } = tf.moments(x, -1, true)
  return tf.add(tf.mul(tf.mul(tf.sub(x, mean), tf.rsqrt(tf.add(variance, eps))), g), b)
}
const plainGelu = (x: tf.Tensor) =>
  tf.mul(tf.mul(x, 0.5), tf.add(tf.tanh(tf.mul(tf.add(x, tf.mul(tf.pow(x, 3), 0.044715)), Math.sqrt(2 / Math.PI))), 1))

function close(a: tf.Tensor, b: tf.Tensor, tol: number): void {
  expect(a.shape).toEqual(b.shape)
  const x = a.dataSync(),
    y = b.dataSync()
  for (let i = 0; i < x.length; i++) expect(Math.abs(x[i]! - y[i]!)).toBeLessThan(tol * (1 + Math.abs(y[i]!)))
}

describe.each(['cpu', 'wasm'] as const)(
  'fused ops with closed-form gradients against autodiff of the plain formula (%s)',
  (backend) => {
    beforeAll(async () => {
      await initBackend('wasm')
      await tf.setBackend(backend)
    })

    test('LayerNorm: values and gradients for x, gain and bias (rank 3, a weighted loss)', () => {
      const x = tf.add(tf.mul(tf.randomNormal([2, 5, 8], 0, 1, 'float32', 1), 3), 1)
      const g = tf.randomNormal([8], 1, 0.5, 'float32', 2),
        b = tf.randomNormal([8], 0, 1, 'float32', 3)
      const w = tf.randomNormal([2, 5, 8], 0, 1, 'float32', 4)
      close(fusedLayerNorm(x, g, b, 1e-5), plainLayerNorm(x, g, b, 1e-5), 1e-5)
      const loss = (ln: typeof plainLayerNorm) => (a: tf.Tensor, c: tf.Tensor, d: tf.Tensor) =>
        tf.sum(tf.mul(tf.tanh(ln(a, c, d, 1e-5)), w))
      const ours = tf.grads(loss(fusedLayerNorm))([x, g, b]),
        ref = tf.grads(loss(plainLayerNorm))([x, g, b])
      ours.forEach((o, i) => close(o, ref[i]!, 1e-4))
    })

    test('LayerNorm with a different epsilon is its own op', () => {
      const x = tf.randomNormal([3, 4], 0, 0.01, 'float32', 5),
        g = tf.ones([4]),
        b = tf.zeros([4])
      close(fusedLayerNorm(x, g, b, 1e-2), plainLayerNorm(x, g, b, 1e-2), 1e-5)
      close(fusedLayerNorm(x, g, b, 1e-6), plainLayerNorm(x, g, b, 1e-6), 1e-4)
    })

    test('GELU (tanh): values and gradient over a wide range', () => {
      const x = tf.linspace(-8, 8, 401)
      const w = tf.randomNormal([401], 0, 1, 'float32', 6)
      close(fusedGeluTanh(x), plainGelu(x), 1e-6)
      const loss = (f: (t: tf.Tensor) => tf.Tensor) => (t: tf.Tensor) => tf.sum(tf.mul(f(t), w))
      close(tf.grad(loss(fusedGeluTanh))(x), tf.grad(loss(plainGelu))(x), 1e-5)
    })
  },
)
