import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import * as tf from '@tensorflow/tfjs'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { initBackend } from '../backend.js'
import type { Batch } from '../data/batch.js'
import { Gpt2LM } from '../models/lm.js'
import { computeGrads } from '../train-step.js'
import { registerLevanterKernels, unregisterLevanterKernels } from './register.js'
import { nativeGemm } from './native-gemm.js'
import { selectGemm } from './wasm-gemm.js'
import { asSwap, reducePerm } from './wasm-transpose.js'

type Data = { shape: number[]; values: number[]; dtype: 'float32' | 'int32' }
const data = (t: tf.Tensor): Data => ({ shape: t.shape, values: [...t.dataSync()], dtype: t.dtype as Data['dtype'] })
const make = (d: Data) => tf.tensor(d.values, d.shape, d.dtype)
const rand = (shape: number[], seed: number): Data => data(tf.randomNormal(shape, 0, 1, 'float32', seed))

/** Run `f` on `backend` over copies of `inputs`; levanter's kernels on or off. */
async function runOn(
  backend: 'wasm' | 'cpu',
  custom: boolean,
  inputs: Data[],
  f: (...xs: tf.Tensor[]) => tf.Tensor | tf.Tensor[],
): Promise<Data[]> {
  await tf.setBackend(backend)
  if (custom) registerLevanterKernels()
  else unregisterLevanterKernels()
  try {
    return tf.tidy(() => {
      const r = f(...inputs.map(make))
      return (Array.isArray(r) ? r : [r]).map(data)
    })
  } finally {
    registerLevanterKernels()
  }
}

function close(ours: Data[], ref: Data[], tol: number): void {
  expect(ours.length).toBe(ref.length)
  ours.forEach((o, k) => {
    expect(o.shape).toEqual(ref[k]!.shape)
    expect(o.dtype).toBe(ref[k]!.dtype)
    const y = ref[k]!.values
    o.values.forEach((x, i) => expect(Math.abs(x - y[i]!)).toBeLessThanOrEqual(tol * (1 + Math.abs(y[i]!))))
  })
}

/** Ours on wasm against the stock kernels on wasm and against the cpu backend. */
async function check(inputs: Data[], f: (...xs: tf.Tensor[]) => tf.Tensor | tf.Tensor[], tol = 1e-5): Promise<void> {
  const ours = await runOn('wasm', true, inputs, f)
  close(ours, await runOn('wasm', false, inputs, f), tol)
  close(ours, await runOn('cpu', false, inputs, f), tol)
}

describe('wasm kernels against the stock kernels', () => {
  beforeAll(async () => {
    await initBackend('wasm')
  })
  afterAll(async () => {
    await tf.setBackend('wasm')
  })

  test.each([
    ['same batch, rank 3', [5, 7, 3], [5, 3, 4]],
    ['same batch, rank 4', [2, 3, 6, 5], [2, 3, 5, 4]],
    ['right operand broadcast (rank 2)', [3, 6, 5], [5, 4]],
    ['right operand broadcast (batch 1)', [2, 3, 6, 5], [1, 5, 4]],
    ['left operand broadcast (rank 2)', [6, 5], [3, 5, 4]],
    ['left operand broadcast (batch 1)', [1, 6, 5], [2, 3, 5, 4]],
    ['partial broadcast (stock path)', [2, 1, 6, 5], [1, 3, 5, 4]],
    ['2-D (stock path)', [6, 5], [5, 4]],
  ] as const)('BatchMatMul %s: %j × %j', async (_, sa, sb) => {
    await check([rand([...sa], 1), rand([...sb], 2)], (a, b) => tf.matMul(a!, b!))
  })

  test.each([
    [false, true],
    [true, false],
    [true, true],
  ])('BatchMatMul with transposeA=%s transposeB=%s', async (tA, tB) => {
    await check([rand([3, 4, 4], 1), rand([3, 4, 4], 2)], (a, b) => tf.matMul(a!, b!, tA, tB))
  })

  test('BatchMatMul gradients of an attention-shaped product', async () => {
    const f = (q: tf.Tensor, k: tf.Tensor, v: tf.Tensor) =>
      tf.sum(tf.mul(tf.matMul(tf.softmax(tf.matMul(q, tf.transpose(k, [0, 2, 1]))), v), v))
    await check(
      [rand([4, 6, 3], 1), rand([4, 6, 3], 2), rand([4, 6, 3], 3)],
      (q, k, v) => tf.grads(f)([q!, k!, v!]),
      1e-4,
    )
  })

  test(
    'BatchMatMul on views (the XNNPACK path) leaks nothing: tensors, ' +
      'bytes and the wasm heap stay put over many calls',
    async () => {
      await tf.setBackend('wasm')
      selectGemm('xnnpack')
      // Per call the backend packs 16 × 128 KiB of weights for XNNPACK: kept by mistake, that is 200 MiB.
      const a = tf.randomNormal([16, 4, 128]),
        b = tf.randomNormal([16, 128, 256])
      const heap = () => (tf.backend() as unknown as { wasm: { HEAPU8: Uint8Array } }).wasm.HEAPU8.length
      for (let i = 0; i < 5; i++) tf.matMul(a, b).dispose()
      const before = { ...tf.memory(), heap: heap() }
      for (let i = 0; i < 100; i++) tf.matMul(a, b).dispose()
      const after = { ...tf.memory(), heap: heap() }
      selectGemm(undefined)
      expect([after.numTensors, after.numBytes, after.heap]).toEqual([before.numTensors, before.numBytes, before.heap])
      tf.dispose([a, b])
    },
  )

  test('reducePerm merges neighbouring axes and drops size-1 axes', () => {
    expect(reducePerm([4, 5], [1, 0])).toEqual({ shape: [4, 5], perm: [1, 0] })
    expect(reducePerm([2, 3, 4, 5], [0, 2, 1, 3])).toEqual({ shape: [2, 3, 4, 5], perm: [0, 2, 1, 3] })
    expect(reducePerm([2, 3, 4, 5], [2, 3, 0, 1])).toEqual({ shape: [6, 20], perm: [1, 0] })
    expect(reducePerm([2, 1, 4, 5], [0, 3, 1, 2])).toEqual({ shape: [2, 4, 5], perm: [0, 2, 1] })
    expect(asSwap(reducePerm([2, 3, 4], [2, 0, 1]))).toEqual({ batch: 1, A: 6, B: 4, inner: 1 })
    expect(asSwap(reducePerm([2, 3, 4], [1, 2, 0]))).toEqual({ batch: 1, A: 2, B: 12, inner: 1 })
    expect(asSwap(reducePerm([2, 3, 4, 5], [3, 1, 2, 0]))).toBeUndefined()
  })

  test.each([
    ['2-D, not a multiple of the tile', [37, 70], [1, 0]],
    ['batched swap of the last two axes', [3, 33, 40], [0, 2, 1]],
    ['heads split: swap with a contiguous inner block', [2, 5, 3, 16], [0, 2, 1, 3]],
    ['heads merge', [2, 3, 5, 16], [0, 2, 1, 3]],
    ['small inner block (stock path)', [2, 5, 3, 4], [0, 2, 1, 3]],
    ['rotation reduced to a 2-D swap', [2, 3, 4], [2, 0, 1]],
    ['general permutation (stock path)', [2, 3, 4, 5], [3, 1, 2, 0]],
    ['size-1 axes', [1, 7, 1, 9], [3, 2, 1, 0]],
  ] as const)('Transpose %s: %j by %j', async (_, shape, perm) => {
    await check([rand([...shape], 4)], (x) => tf.transpose(x!, [...perm]), 0)
  })

  test('Transpose copies int32 bit for bit (values whose bits read as NaN floats too)', async () => {
    const values = Array.from({ length: 40 * 33 }, (_, i) => (i % 3 === 0 ? -1 - i : i * 65_537))
    await check([{ shape: [40, 33], values, dtype: 'int32' }], (x) => tf.transpose(x!), 0)
  })

  test.each([
    ['contiguous rows', [6, 5], [2, 0], [3, 5]],
    ['a middle block of columns', [6, 5], [1, 2], [4, 2]],
    ['rank 3, last axis cut', [3, 4, 9], [1, 1, 3], [2, 3, 3]],
    ['rank 4, inner axes whole', [3, 4, 5, 2], [1, 2, 0, 0], [2, 2, 5, 2]],
    ['rank 5, every axis cut', [3, 4, 3, 5, 4], [1, 1, 1, 2, 1], [2, 2, 1, 3, 2]],
    ['empty', [4, 4], [1, 1], [0, 3]],
  ] as const)('Slice %s: %j from %j size %j', async (_, shape, begin, size) => {
    await check([rand([...shape], 6)], (x) => tf.slice(x!, [...begin], [...size]), 0)
  })

  test.each([
    ['three equal pieces of the last axis', [2, 5, 12], 3, 2],
    ['uneven sizes on a middle axis', [3, 7, 4], [2, 4, 1], 1],
    ['leading axis', [6, 3, 2], [1, 5], 0],
  ] as const)('SplitV %s', async (_, shape, split, axis) => {
    await check([rand([...shape], 7)], (x) => tf.split(x!, split as number | number[], axis), 0)
    const ints = {
      shape: [...shape],
      values: Array.from({ length: shape.reduce((a, b) => a * b, 1) }, (_, i) => i * 65_537 - 7),
      dtype: 'int32' as const,
    }
    await check([ints], (x) => tf.split(x!, split as number | number[], axis), 0)
  })

  test.each([
    ['embedding rows', [11, 6], [[3, 0, 10, 3]]],
    [
      'a vector by a 2-D index',
      [9],
      [
        [1, 2],
        [8, 0],
      ],
    ],
    ['rows of a rank-3 table', [5, 2, 3], [[4, 4, 1]]],
    ['no indices', [4, 3], [[]]],
  ] as const)('GatherV2 along axis 0: %s', async (_, shape, idx) => {
    const ids = { shape: [idx.length, idx[0]!.length], values: idx.flat() as number[], dtype: 'int32' as const }
    await check([rand([...shape], 8), ids], (x, i) => tf.gather(x!, i!), 0)
  })

  test('GatherV2 on another axis is the stock kernel`s', async () => {
    const ids = { shape: [2], values: [2, 0], dtype: 'int32' as const }
    await check([rand([3, 4], 9), ids], (x, i) => tf.gather(x!, i!, 1), 0)
  })

  test('Identity and same-dtype Cast share the buffer; gradients through saved clones agree', async () => {
    await check(
      [rand([4, 5], 5)],
      (x) => [tf.clone(x!), tf.cast(x!, 'float32'), tf.cast(tf.cast(x!, 'int32'), 'float32')],
      0,
    )
    const f = (x: tf.Tensor, y: tf.Tensor) => tf.sum(tf.mul(tf.mul(x, y), tf.tanh(x)))
    await check([rand([3, 8], 6), rand([3, 8], 7)], (x, y) => tf.grads(f)([x!, y!]), 1e-5)
    await tf.setBackend('wasm')
    const before = tf.memory()
    const x = tf.randomNormal([64])
    const y = tf.clone(x)
    x.dispose()
    expect(y.dataSync().length).toBe(64) // the shared buffer outlives the first tensor
    y.dispose()
    expect([tf.memory().numTensors, tf.memory().numBytes]).toEqual([before.numTensors, before.numBytes])
  })

  test('a GPT-2 training gradient on wasm with levanter kernels equals the stock cpu one', async () => {
    const cfg = { vocabSize: 32, seqLen: 8, dModel: 32, nLayers: 2, nHeads: 2 }
    const B = 3,
      n = B * cfg.seqLen
    const ids = Int32Array.from({ length: n }, (_, i) => (i * 7 + 3) % 32)
    const batch: Batch = {
      batchSize: B,
      seqLen: cfg.seqLen,
      inputs: ids,
      targets: ids.map((x) => (x + 1) % 32),
      mask: new Float32Array(n).fill(1),
    }
    const gradsOn = async (backend: 'wasm' | 'cpu', custom: boolean) => {
      await tf.setBackend(backend)
      if (!custom) unregisterLevanterKernels()
      const model = new Gpt2LM(cfg, 3)
      try {
        const { loss, grads } = computeGrads(model, batch, n)
        const out = new Map([...grads].map(([k, g]) => [k, [...g.dataSync()]]))
        tf.dispose([...grads.values()])
        return { loss, grads: out }
      } finally {
        model.dispose()
        registerLevanterKernels()
      }
    }
    const ours = await gradsOn('wasm', true),
      ref = await gradsOn('cpu', false)
    expect(Math.abs(ours.loss - ref.loss)).toBeLessThan(1e-5)
    expect([...ours.grads.keys()]).toEqual([...ref.grads.keys()])
    for (const [k, g] of ours.grads) {
      const r = ref.grads.get(k)!
      g.forEach((x, i) => expect(Math.abs(x - r[i]!), k).toBeLessThan(1e-5 + 1e-3 * Math.abs(r[i]!)))
    }
  })
})

const HIGH_HEAP_GEMMS = nativeGemm().addon ? ['native', 'fma'] : ['fma']
test.each(HIGH_HEAP_GEMMS)(
  '%s: tensors above 2 GiB of wasm heap: transpose, products and a whole GPT-2 gradient are right',
  (gemm) => {
    // In a process of its own: the heap grows past 2 GiB and never shrinks.
    const script = fileURLToPath(new URL('../test-support/high-heap.ts', import.meta.url))
    const r = spawnSync(process.execPath, ['--import', 'tsx', script], {
      encoding: 'utf8',
      timeout: 120_000,
      env: { ...process.env, LEVANTER_GEMM: gemm },
    })
    expect(r.status, r.stderr).toBe(0)
    const out = JSON.parse(r.stdout.trim().split('\n').pop()!) as {
      gemm: string
      heapBytes: number
      offset: number
      ok: boolean
      mismatch?: string
    }
    expect(out.gemm).toBe(gemm)
    expect(out.offset).toBeGreaterThan(2 ** 31)
    expect(out.mismatch).toBeUndefined()
    expect(out.ok).toBe(true)
  },
  150_000,
)
