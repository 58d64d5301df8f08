import * as tf from '@tensorflow/tfjs'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { initBackend } from '../backend.js'
import { maskedCrossEntropy } from '../loss.js'
import { Gpt2LM } from '../models/lm.js'
import { installLeanBackprop, streamGradients, uninstallLeanBackprop } from './lean-backprop.js'

const bytes = (t: tf.Tensor) => {
  const d = t.dataSync() as Float32Array
  return Buffer.from(d.buffer, d.byteOffset, d.byteLength)
}
const heapBytes = () => (tf.backend() as unknown as { wasm: { HEAPU8: Uint8Array } }).wasm.HEAPU8.length

describe('the lean backward pass', () => {
  beforeAll(async () => {
    await initBackend('wasm')
  })
  afterAll(() => installLeanBackprop())

  /** A GPT-2 loss and its gradients (the model's variables), with the lean pass on or off. */
  function step(lean: boolean, model: Gpt2LM) {
    if (lean) installLeanBackprop()
    else uninstallLeanBackprop()
    const ids = tf.tensor2d(
      Array.from({ length: 4 * 32 }, (_, i) => (i * 11) % 97),
      [4, 32],
      'int32',
    )
    const targets = tf.tensor2d(
      Array.from({ length: 4 * 32 }, (_, i) => (i * 7 + 3) % 97),
      [4, 32],
      'int32',
    )
    const before = tf.memory().numTensors
    const { value, grads } = tf.variableGrads(
      () => maskedCrossEntropy(model.forward(ids), targets, tf.ones([4, 32])),
      [...model.params.values()],
    )
    const made = tf.memory().numTensors - before
    tf.dispose([ids, targets])
    return { value, grads, made }
  }

  test('gives the same bits as tfjs`s pass and leaves the same tensors behind', () => {
    const model = new Gpt2LM({ vocabSize: 97, seqLen: 32, dModel: 32, nLayers: 2, nHeads: 4 }, 1)
    const lean = step(true, model)
    const stock = step(false, model)
    expect(lean.made).toBe(stock.made)
    expect(bytes(lean.value).equals(bytes(stock.value))).toBe(true)
    for (const [name, g] of Object.entries(stock.grads))
      expect(bytes(lean.grads[name]!).equals(bytes(g)), name).toBe(true)
    model.dispose()
  })

  test('a training step`s wasm heap grows less than under tfjs`s pass', () => {
    // each run in a fresh heap would need a fresh backend; instead the lean pass runs first on a
    // model big enough that its peak sets the heap, then tfjs's pass must grow it further
    const model = new Gpt2LM({ vocabSize: 256, seqLen: 64, dModel: 128, nLayers: 4, nHeads: 4 }, 2)
    const ids = tf.tensor2d(
      Array.from({ length: 32 * 64 }, (_, i) => (i * 13) % 256),
      [32, 64],
      'int32',
    )
    const run = (lean: boolean) => {
      if (lean) installLeanBackprop()
      else uninstallLeanBackprop()
      const { value, grads } = tf.variableGrads(
        () => maskedCrossEntropy(model.forward(ids), ids, tf.ones([32, 64])),
        [...model.params.values()],
      )
      tf.dispose([value, ...Object.values(grads)])
      return heapBytes()
    }
    run(true)
    const leanHeap = run(true)
    const stockHeap = run(false)
    expect(stockHeap).toBeGreaterThan(leanHeap)
    ids.dispose()
    model.dispose()
  })

  test('dy passed through unchanged (adds), a caller`s dy, and second-order gradients', () => {
    installLeanBackprop()
    const x = tf.tensor1d([1, 2, 3])
    // y = x + x + x·x: Add passes dy through to both inputs
    const g = tf.grad((t: tf.Tensor) => tf.sum(tf.add(tf.add(t, t), tf.mul(t, t))))(x)
    expect(Array.from(g.dataSync())).toEqual([4, 6, 8])
    const dy = tf.tensor1d([1, 10, 100])
    const gd = tf.grad((t: tf.Tensor) => tf.add(t, t))(x, dy)
    expect(Array.from(gd.dataSync())).toEqual([2, 20, 200])
    expect(dy.isDisposed).toBe(false)
    // d²/dx² of x³ = 6x
    const second = tf.grad((t: tf.Tensor) => tf.sum(tf.grad((u: tf.Tensor) => tf.sum(tf.mul(tf.mul(u, u), u)))(t)))(x)
    expect(Array.from(second.dataSync())).toEqual([6, 12, 18])
  })
  test('streamed passes awaiting between nodes in one process (inline mesh members): each its own bits', async () => {
    installLeanBackprop()
    const cfg = { vocabSize: 31, seqLen: 8, dModel: 16, nLayers: 2, nHeads: 2 }
    const models = [new Gpt2LM(cfg, 1), new Gpt2LM(cfg, 2)]
    const ids = [0, 1].map((k) =>
      tf.tensor2d(
        Array.from({ length: 16 }, (_, i) => (i * (k + 3)) % 31),
        [2, 8],
        'int32',
      ),
    )
    const before = tf.memory().numTensors
    /** One pass on model k: its loss and gradients (copies), awaiting a macrotask between nodes when `yielding`. */
    const pass = async (k: number, yielding: boolean) => {
      const vars = [...models[k]!.params.values()]
      const grads: Float32Array[] = []
      const y = await streamGradients(
        () => maskedCrossEntropy(models[k]!.forward(ids[k]!), ids[k]!, tf.ones([2, 8])),
        vars,
        (i, g) => (grads[i] = (g.dataSync() as Float32Array).slice()),
        yielding ? () => new Promise<void>((r) => setImmediate(r)) : undefined,
      )
      const loss = (y.dataSync() as Float32Array).slice()
      y.dispose()
      return { loss, grads }
    }
    const alone = [await pass(0, false), await pass(1, false)]
    const together = await Promise.all([pass(0, true), pass(1, true)])
    together.forEach((r, k) => {
      expect(Buffer.from(r.loss.buffer).equals(Buffer.from(alone[k]!.loss.buffer))).toBe(true)
      const want = alone[k]!.grads
      r.grads.forEach((g, i) => expect(Buffer.from(g.buffer).equals(Buffer.from(want[i]!.buffer)), `${i}`).toBe(true))
    })
    expect(tf.memory().numTensors).toBe(before) // nothing leaked, nothing of the other pass disposed early
    tf.dispose(ids)
    for (const m of models) m.dispose()
  })
})
