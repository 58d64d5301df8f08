import { afterAll, describe, expect, test } from 'vitest'
import { lcgFill as fill } from '../test-support/lcg-fill.js'
import { nativeGemm } from './native-gemm.js'

// The decode step's batch product (native/gemv-batch.h: a server's rows over a weight matrix with contiguous rows,
// B read in place) against float64 references at ragged shapes, GPT-2 small's block shapes at 16 rows and a
// vocabulary-wide N included, and bit for bit against the native GEMM (the tensor ops' products), which the
// one-call decode step's logits must equal.
const addon = nativeGemm().addon
const here = addon?.gemmRowsBatch !== undefined

/** A·B in float64 and Σ|a·b| per element (the scale of its float32 rounding). */
function reference(a: Float32Array, b: Float32Array, M: number, K: number, N: number) {
  const out = new Float64Array(M * N),
    scale = new Float64Array(M * N)
  for (let m = 0; m < M; m++)
    for (let k = 0; k < K; k++) {
      const x = a[m * K + k]!
      for (let n = 0; n < N; n++) {
        const t = x * b[k * N + n]!
        out[m * N + n]! += t
        scale[m * N + n]! += Math.abs(t)
      }
    }
  return { out, scale }
}

function worstError(c: Float32Array, start: Float32Array | undefined, ref: ReturnType<typeof reference>, K: number) {
  let worst = 0
  for (let i = 0; i < c.length; i++) {
    const s = start?.[i] ?? 0
    // float32 FMA chains over K terms (and the add of C's start): at most ~K·2^-23 of Σ|a·b| + |start|
    const err = Math.abs(c[i]! - s - ref.out[i]!) / ((ref.scale[i]! + Math.abs(s)) * K * 2 ** -23 + 1e-30)
    worst = Math.max(worst, err)
  }
  return worst
}

/** The product on the AVX-512 kernel (where the CPU has it) and on the AVX2 one, stored and accumulated, within
 * float32's rounding of the float64 reference. */
function expectBothKernels(a: Float32Array, b: Float32Array, M: number, K: number, N: number) {
  const ref = reference(a, b, M, K, N)
  for (const avx2 of [false, true]) {
    const c = new Float32Array(M * N).fill(Number.NaN)
    addon!.gemmRowsBatch!(a, b, c, M, K, N, false, avx2)
    expect(worstError(c, undefined, ref, K)).toBeLessThanOrEqual(1)
    const start = fill(M * N, 5)
    c.set(start)
    addon!.gemmRowsBatch!(a, b, c, M, K, N, true, avx2)
    expect(worstError(c, start, ref, K)).toBeLessThanOrEqual(1)
  }
}

describe.skipIf(!here)('the batch product (native/gemv-batch.h)', () => {
  afterAll(() => addon?.setThreads(1))
  const shapes: [number, number, number][] = []
  for (const M of [5, 8, 9, 16, 17])
    for (const [K, N] of [
      [777, 37],
      [300, 2309],
      [257, 8],
      [9, 1],
      [1, 33],
      [513, 255],
    ] as const)
      shapes.push([M, K, N])
  // each on the AVX-512 kernel (where the CPU has it) and on the AVX2 one
  test.each(shapes)('M %i, K %i, N %i: the float64 product, stored and accumulated, both kernels', (M, K, N) => {
    expectBothKernels(fill(M * K, M + K), fill(K * N, N + 1), M, K, N)
  })

  // the AVX2 kernel's row groups of 1, 2 and 3 rows, and more rows than it takes at a time (48: 8 groups of 6, then 2)
  test.each([
    [1, 300, 130],
    [2, 300, 130],
    [3, 257, 130],
    [50, 300, 130],
  ])('M %i, K %i, N %i: the float64 product, stored and accumulated, both kernels', (M, K, N) => {
    expectBothKernels(fill(M * K, M + 7), fill(K * N, 11), M, K, N)
  })

  test.each([
    [16, 96, 50257],
    [5, 777, 517],
    [9, 300, 37],
  ])('M %i, K %i, N %i, B transposed (the tied head): the float64 product, both kernels', (M, K, N) => {
    const a = fill(M * K, 3),
      bt = fill(N * K, 4)
    const b = new Float32Array(K * N)
    for (let n = 0; n < N; n++) for (let k = 0; k < K; k++) b[k * N + n] = bt[n * K + k]!
    const ref = reference(a, b, M, K, N)
    for (const avx2 of [false, true]) {
      const c = new Float32Array(M * N).fill(Number.NaN)
      addon!.gemmRowsBatch!(a, bt, c, M, K, N, false, avx2, true)
      expect(worstError(c, undefined, ref, K)).toBeLessThanOrEqual(1)
    }
  })

  test('16 rows over a vocabulary-wide B (K 96, N 50257): the float64 product', () => {
    const M = 16,
      K = 96,
      N = 50257
    const a = fill(M * K, 3),
      b = fill(K * N, 4)
    const c = new Float32Array(M * N)
    addon!.gemmRowsBatch!(a, b, c, M, K, N, false)
    expect(worstError(c, undefined, reference(a, b, M, K, N), K)).toBeLessThanOrEqual(1)
  })

  // the native GEMM on a heap of its own: A at 0, B after it, C after B
  const gemmBits = (a: Float32Array, b: Float32Array, M: number, K: number, N: number, start: Float32Array | null) => {
    const WA = (
      globalThis as unknown as { WebAssembly: { Memory: new (d: { initial: number }) => { buffer: ArrayBuffer } } }
    ).WebAssembly
    const mem = new WA.Memory({ initial: Math.ceil((4 * (M * K + K * N + M * N)) / 65536) + 2 })
    const pb = 4 * M * K,
      pc = pb + 4 * K * N
    new Float32Array(mem.buffer, 0, M * K).set(a)
    new Float32Array(mem.buffer, pb, K * N).set(b)
    const c = new Float32Array(mem.buffer, pc, M * N)
    if (start) c.set(start)
    addon!.gemm(mem.buffer, 0, pb, pc, M, K, N, false, false, 1, 0, 0, 0, start !== null)
    return c.slice()
  }

  test.each([
    [16, 768, 2304],
    [16, 3072, 768],
    [7, 777, 2309],
    [13, 300, 37],
    [50, 300, 261],
  ])('M %i, K %i, N %i: the native GEMM bit for bit, both kernels, on 1 and 2 threads', (M, K, N) => {
    const a = fill(M * K, 17),
      b = fill(K * N, 18),
      start = fill(M * N, 19)
    for (const threads of [1, 2]) {
      addon!.setThreads(threads)
      for (const accumulate of [false, true])
        for (const avx2 of [false, true]) {
          const c = accumulate ? start.slice() : new Float32Array(M * N)
          addon!.gemmRowsBatch!(a, b, c, M, K, N, accumulate, avx2)
          expect(c).toEqual(gemmBits(a, b, M, K, N, accumulate ? start : null))
        }
    }
    addon!.setThreads(1)
  })

  test('wrong lengths are a RangeError', () => {
    expect(() =>
      addon!.gemmRowsBatch!(new Float32Array(3), new Float32Array(4), new Float32Array(5), 5, 1, 1, false),
    ).toThrow(/array lengths do not match/)
  })
})
