import * as tf from '@tensorflow/tfjs'
import { beforeAll, describe, expect, test } from 'vitest'
import { initBackend } from '../backend.js'
import { registerLevanterKernels, unregisterLevanterKernels } from './register.js'

function close(a: tf.Tensor, b: tf.Tensor, tol = 1e-4): void {
  expect(a.shape).toEqual(b.shape)
  const x = a.dataSync(),
    y = b.dataSync()
  for (let i = 0; i < x.length; i++) expect(Math.abs(x[i]! - y[i]!)).toBeLessThan(tol * (1 + Math.abs(y[i]!)))
}

function gradsOf(f: (...xs: tf.Tensor[]) => tf.Tensor, xs: tf.Tensor[], custom: boolean): tf.Tensor[] {
  if (custom) registerLevanterKernels()
  else unregisterLevanterKernels()
  try {
    return tf.grads(f)(xs)
  } finally {
    registerLevanterKernels()
  }
}

describe('kernels against the stock ops on cpu', () => {
  beforeAll(async () => {
    await initBackend('wasm')
    await tf.setBackend('cpu')
  })

  test.each([
    [false, false, [2, 3, 4], [2, 4, 5]],
    [false, true, [2, 3, 4], [2, 5, 4]],
    [true, false, [3, 4], [3, 5]],
    [true, true, [2, 4, 3], [2, 5, 4]],
    [false, false, [2, 2, 3, 4], [2, 2, 4, 5]],
  ] as const)('BatchMatMul gradient tA=%s tB=%s %j×%j', (tA, tB, sa, sb) => {
    const a = tf.randomNormal([...sa], 0, 1, 'float32', 1),
      b = tf.randomNormal([...sb], 0, 1, 'float32', 2)
    const f = (x: tf.Tensor, y: tf.Tensor) => tf.sum(tf.mul(tf.matMul(x, y, tA, tB), tf.sin(tf.matMul(x, y, tA, tB))))
    const stock = gradsOf(f, [a, b], false),
      ours = gradsOf(f, [a, b], true)
    close(ours[0]!, stock[0]!)
    close(ours[1]!, stock[1]!)
  })

  test(
    'BatchMatMul gradient sums over a broadcast batch (stock rejects ' + 'this case; compare with an explicit tile)',
    () => {
      const a = tf.randomNormal([2, 3, 4], 0, 1, 'float32', 1),
        b = tf.randomNormal([4, 5], 0, 1, 'float32', 2)
      const ours = gradsOf((x: tf.Tensor, y: tf.Tensor) => tf.sum(tf.square(tf.matMul(x, y))), [a, b], true)
      const stock = gradsOf(
        (x: tf.Tensor, y: tf.Tensor) => tf.sum(tf.square(tf.matMul(x, tf.tile(tf.expandDims(y, 0), [2, 1, 1])))),
        [a, b],
        false,
      )
      close(ours[0]!, stock[0]!)
      close(ours[1]!, stock[1]!)
    },
  )

  test('GatherV2 gradient (embedding lookup with repeats)', () => {
    const table = tf.randomNormal([7, 3], 0, 1, 'float32', 3)
    const ids = tf.tensor2d(
      [
        [1, 1, 6],
        [0, 1, 3],
      ],
      [2, 3],
      'int32',
    )
    const w = tf.randomNormal([2, 3, 3], 0, 1, 'float32', 4)
    const f = (t: tf.Tensor) => tf.sum(tf.mul(tf.gather(t, ids), w))
    close(gradsOf(f, [table], true)[0]!, gradsOf(f, [table], false)[0]!, 1e-6)
  })

  test('GatherV2 gradient runs on wasm, where the stock one cannot', async () => {
    const table = tf.randomNormal([7, 3], 0, 1, 'float32', 3)
    const ids = tf.tensor1d([1, 1, 6, 0], 'int32')
    const expected = gradsOf((t: tf.Tensor) => tf.sum(tf.square(tf.gather(t, ids))), [table], false)[0]!.arraySync()
    await tf.setBackend('wasm')
    try {
      const t2 = tf.tensor(table.arraySync() as number[][]),
        ids2 = tf.tensor1d([1, 1, 6, 0], 'int32')
      const g = tf.grad((t: tf.Tensor) => tf.sum(tf.square(tf.gather(t, ids2))))(t2)
      close(g, tf.tensor(expected as number[][]), 1e-6)
    } finally {
      await tf.setBackend('cpu')
    }
  })
})
