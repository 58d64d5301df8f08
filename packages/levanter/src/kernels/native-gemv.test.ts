import { afterAll, describe, expect, test } from 'vitest'
import { lcgFill as fill } from '../test-support/lcg-fill.js'
import { nativeGemm } from './native-gemm.js'

// The native GEMM's small-M path (native/gemv.cc: at most 4 rows of A, B streamed in place) against float64
// references at ragged shapes, the vocab head's [1, 768]·[768, 50257] (B transposed: the tied token table) included,
// and bit for bit against the blocked GEMM that products of more rows run on.
const addon = nativeGemm().addon
const PAGE = 65536

// The WebAssembly API as far as used here (the project's type libraries do not declare it).
const WA = (
  globalThis as unknown as { WebAssembly: { Memory: new (d: { initial: number }) => { buffer: ArrayBuffer } } }
).WebAssembly
/** One wasm heap for every case: A at 0, then B, then C. */
const memory = new WA.Memory({ initial: Math.ceil((4 * (4 * 800 + 800 * 50257 + 16 * 50257)) / PAGE) + 8 })

type Product = { M: number; K: number; N: number; tA: boolean; tB: boolean }

/** Operands placed on the heap: byte offsets of A, B and C, and views of them. */
function place({ M, K, N }: Product, seed: number) {
  const a = fill(M * K, seed),
    b = fill(K * N, seed + 1)
  const pa = 0,
    pb = 4 * Math.ceil(a.length / 16) * 16,
    pc = pb + 4 * Math.ceil(b.length / 16) * 16
  new Float32Array(memory.buffer, pa, a.length).set(a)
  new Float32Array(memory.buffer, pb, b.length).set(b)
  const c = new Float32Array(memory.buffer, pc, M * N)
  return { a, b, c, pa, pb, pc }
}

function gemm(p: Product, pa: number, pb: number, pc: number, accumulate = false): void {
  addon!.gemm(memory.buffer, pa, pb, pc, p.M, p.K, p.N, p.tA, p.tB, 1, 0, 0, 0, accumulate)
}

/** op(A)·op(B) in float64, and Σ|a·b| per element (the scale of its float32 rounding). */
function reference({ M, K, N, tA, tB }: Product, a: Float32Array, b: Float32Array) {
  const out = new Float64Array(M * N),
    scale = new Float64Array(M * N)
  for (let m = 0; m < M; m++)
    for (let n = 0; n < N; n++) {
      let s = 0,
        abs = 0
      for (let k = 0; k < K; k++) {
        const x = a[tA ? k * M + m : m * K + k]! * b[tB ? n * K + k : k * N + n]!
        s += x
        abs += Math.abs(x)
      }
      out[m * N + n] = s
      scale[m * N + n] = abs
    }
  return { out, scale }
}

function expectClose(c: Float32Array, ref: { out: Float64Array; scale: Float64Array }, K: number): void {
  let worst = 0
  for (let i = 0; i < c.length; i++) {
    // float32 FMA chains over K terms: at most ~K·2^-24 of Σ|a·b|
    const err = Math.abs(c[i]! - ref.out[i]!) / (ref.scale[i]! * K * 2 ** -23 + 1e-30)
    worst = Math.max(worst, err)
  }
  expect(worst).toBeLessThanOrEqual(1)
}

describe.skipIf(!addon)('native small-M GEMM (native/gemv.cc)', () => {
  afterAll(() => addon?.setThreads(1))

  const shapes: Product[] = []
  for (const M of [1, 2, 3, 4])
    for (const [K, N] of [
      [768, 37],
      [777, 13],
      [1, 7],
      [9, 1],
      [300, 2309],
      [257, 8],
    ] as const)
      for (const tB of [false, true]) shapes.push({ M, K, N, tA: M % 2 === 0, tB })
  test.each(shapes)('M $M, K $K, N $N, tA $tA, tB $tB: the float64 product', (p) => {
    const { a, b, c, pa, pb, pc } = place(p, p.M * 1000 + p.K + p.N)
    gemm(p, pa, pb, pc)
    expectClose(c, reference(p, a, b), p.K)
  })

  test.each([
    { M: 1, K: 768, N: 50257, tA: false, tB: true },
    { M: 1, K: 777, N: 50257, tA: false, tB: false },
    { M: 4, K: 777, N: 50257, tA: false, tB: true },
    { M: 3, K: 768, N: 50257, tA: true, tB: false },
  ])('the vocab head, M $M, K $K, N $N, tB $tB: the float64 product', (p) => {
    const { a, b, c, pa, pb, pc } = place(p, 7 + p.M + p.K)
    gemm(p, pa, pb, pc)
    expectClose(c, reference(p, a, b), p.K)
  })

  test('accumulating adds the product to C, pass by pass as the blocked GEMM does', () => {
    const p = { M: 2, K: 777, N: 45, tA: false, tB: true }
    const { a, b, c, pa, pb, pc } = place(p, 99)
    const start = fill(p.M * p.N, 5)
    c.set(start)
    gemm(p, pa, pb, pc, true)
    const ref = reference(p, a, b)
    expectClose(
      Float32Array.from(c, (v, i) => v - start[i]!),
      { out: ref.out, scale: ref.scale.map((s, i) => s + Math.abs(start[i]!) / p.K) },
      p.K,
    )
  })

  test.each([
    { K: 777, N: 2309, tB: false },
    { K: 777, N: 517, tB: true },
    { K: 3072, N: 768, tB: false },
  ])('rows of a 12-row product (blocked GEMM) equal 1 to 4 rows alone, bit for bit (K $K, N $N, tB $tB)', (s) => {
    const big = { M: 12, K: s.K, N: s.N, tA: false, tB: s.tB }
    const { c, pa, pb, pc } = place(big, 3)
    for (const accumulate of [false, true]) {
      const start = fill(12 * s.N, 11)
      c.set(start)
      gemm(big, pa, pb, pc, accumulate)
      const whole = c.slice()
      for (const M of [1, 2, 3, 4])
        for (const r0 of [0, 5, 12 - M]) {
          const rows = new Float32Array(memory.buffer, pc, M * s.N)
          rows.set(start.subarray(r0 * s.N, (r0 + M) * s.N))
          gemm({ ...big, M }, pa + 4 * r0 * s.K, pb, pc, accumulate)
          expect(rows).toEqual(whole.subarray(r0 * s.N, (r0 + M) * s.N))
        }
    }
  })

  test.each([
    { M: 1, K: 768, N: 50257, tA: false, tB: true },
    { M: 4, K: 777, N: 1029, tA: true, tB: false },
    { M: 2, K: 3072, N: 771, tA: false, tB: false },
  ])('setSmallM(false) (the blocked GEMM) gives the same bits, M $M, K $K, N $N', (p) => {
    const { c, pa, pb, pc } = place(p, 23)
    expect(addon!.setSmallM!()).toBe(true)
    gemm(p, pa, pb, pc)
    const fast = c.slice()
    try {
      expect(addon!.setSmallM!(false)).toBe(false)
      c.fill(Number.NaN)
      gemm(p, pa, pb, pc)
    } finally {
      addon!.setSmallM!(true)
    }
    expect(c).toEqual(fast)
  })

  test('the split over threads changes no bit', () => {
    const p = { M: 3, K: 777, N: 50257, tA: false, tB: true }
    const { c, pa, pb, pc } = place(p, 17)
    addon!.setThreads(1)
    gemm(p, pa, pb, pc)
    const one = c.slice()
    for (const q of [{ ...p, tB: false }, p]) {
      addon!.setThreads(1)
      gemm(q, pa, pb, pc)
      const ref = c.slice()
      addon!.setThreads(3)
      gemm(q, pa, pb, pc)
      expect(c).toEqual(ref)
    }
    expect(c).toEqual(one)
  })

  // B rows contiguous on several threads splits by 256-deep passes (the passes past the last whole round by columns),
  // each pass's sums added to C in pass order afterwards: the one-thread bits, accumulating or not
  test.each([
    { M: 1, K: 768, N: 2304 },
    { M: 4, K: 777, N: 1029 },
    { M: 2, K: 3072, N: 771 },
    { M: 3, K: 513, N: 13 },
  ])('the split by passes over 2 and 3 threads changes no bit, M $M, K $K, N $N', (s) => {
    const p = { ...s, tA: false, tB: false }
    const { c, pa, pb, pc } = place(p, 41)
    const start = fill(p.M * p.N, 13)
    for (const accumulate of [false, true]) {
      addon!.setThreads(1)
      c.set(start)
      gemm(p, pa, pb, pc, accumulate)
      const one = c.slice()
      for (const t of [2, 3]) {
        addon!.setThreads(t)
        c.set(start)
        gemm(p, pa, pb, pc, accumulate)
        expect(c).toEqual(one)
      }
    }
    addon!.setThreads(1)
  })

  test('the affine layer on one row: bias plus the product', () => {
    const [inF, outF] = [777, 61]
    const x = fill(inF, 1),
      w = fill(inF * outF, 2),
      bias = fill(outF, 3)
    const y = new Float32Array(outF)
    addon!.affineForward(x, w, bias, y)
    const ref = reference({ M: 1, K: inF, N: outF, tA: false, tB: false }, x, w)
    expectClose(
      Float32Array.from(y, (v, i) => v - bias[i]!),
      { out: ref.out, scale: ref.scale.map((s, i) => s + Math.abs(bias[i]!) / inF) },
      inF,
    )
  })
})

describe.skipIf(!addon?.memoryBandwidth)('memoryBandwidth (native/stream.cc)', () => {
  test("answers positive GB/s for copy, triad and read, on one thread or the pool's", () => {
    for (const threads of [1, 2]) {
      addon!.setThreads(2)
      const bw = addon!.memoryBandwidth!(8, 1, threads)
      addon!.setThreads(1)
      expect(bw.threads).toBe(threads)
      for (const k of ['copy', 'triad', 'read'] as const) {
        expect(Number.isFinite(bw[k])).toBe(true)
        expect(bw[k]).toBeGreaterThan(0)
      }
    }
  })

  test('bad sizes are a RangeError naming the call', () => {
    expect(() => addon!.memoryBandwidth!(0, 1)).toThrow(/memoryBandwidth\(megabytes, repeats/)
    expect(() => addon!.memoryBandwidth!(8, 1.5)).toThrow(/memoryBandwidth/)
    expect(() => addon!.memoryBandwidth!(8, 1, 0)).toThrow(/threads 1 to 64/)
  })
})

type Bf16Addon = {
  packBf16?(buffer: ArrayBuffer, offsets: Float64Array, shapes: Float64Array): object
  gemvBf16?(pack: object, i: number, a: Float32Array, c: Float32Array, M: number, accumulate: boolean): void
}
const bf16Addon = addon as (typeof addon & Bf16Addon) | undefined

/** Each float → bfloat16 → float, round to nearest even (what the kernel does to both operands). */
function roundBf16(x: Float32Array): Float32Array {
  const out = x.slice(),
    u = new Uint32Array(out.buffer)
  for (let i = 0; i < u.length; i++) u[i] = (((u[i]! + 0x7fff + ((u[i]! >>> 16) & 1)) >>> 16) << 16) >>> 0
  return out
}

describe.skipIf(!bf16Addon?.packBf16 || !addon?.hasBf16?.())(
  'bf16-weight small-M products (native/gemv-bf16.cc)',
  () => {
    afterAll(() => addon?.setThreads(1))

    const cases: Product[] = []
    for (const M of [1, 2, 3, 4, 5, 9])
      for (const [K, N] of [
        [777, 13],
        [1, 7],
        [9, 65],
        [768, 2309],
        [3, 129],
      ] as const)
        for (const tB of [false, true]) cases.push({ M, K, N, tA: false, tB })
    cases.push({ M: 1, K: 768, N: 50257, tA: false, tB: true }, { M: 3, K: 777, N: 50257, tA: false, tB: false })
    test.each(cases)('M $M, K $K, N $N, tB $tB: the float64 product of the bf16-rounded operands', (p) => {
      const { a, b, pb } = place(p, 31 + p.M + p.K + p.N)
      const [rs, cs] = p.tB ? [1, p.K] : [p.N, 1]
      const pack = bf16Addon!.packBf16!(memory.buffer, Float64Array.of(pb), Float64Array.of(p.K, p.N, rs, cs))
      const start = fill(p.M * p.N, 3)
      for (const accumulate of [false, true]) {
        const c = start.slice()
        bf16Addon!.gemvBf16!(pack, 0, a, c, p.M, accumulate)
        const ref = reference(p, roundBf16(a), roundBf16(b))
        const base = accumulate ? start : new Float32Array(c.length)
        expectClose(
          Float32Array.from(c, (v, i) => v - base[i]!),
          { out: ref.out, scale: ref.scale.map((s, i) => s + Math.abs(base[i]!) / p.K) },
          p.K + 1,
        )
      }
    })

    test('the split over threads changes no bit', () => {
      const p = { M: 3, K: 777, N: 50257, tA: false, tB: true }
      const { a, pb } = place(p, 5)
      const pack = bf16Addon!.packBf16!(memory.buffer, Float64Array.of(pb), Float64Array.of(p.K, p.N, 1, p.K))
      const one = new Float32Array(p.M * p.N),
        three = new Float32Array(p.M * p.N)
      addon!.setThreads(1)
      bf16Addon!.gemvBf16!(pack, 0, a, one, p.M, false)
      addon!.setThreads(3)
      bf16Addon!.gemvBf16!(pack, 0, a, three, p.M, false)
      expect(three).toEqual(one)
    })

    test('a matrix past the buffer and a wrong length are RangeErrors saying so', () => {
      expect(() =>
        bf16Addon!.packBf16!(memory.buffer, Float64Array.of(memory.buffer.byteLength - 8), Float64Array.of(4, 4, 4, 1)),
      ).toThrow(/packBf16: a matrix does not fit/)
      const pack = bf16Addon!.packBf16!(memory.buffer, Float64Array.of(0), Float64Array.of(4, 4, 4, 1))
      expect(() => bf16Addon!.gemvBf16!(pack, 0, new Float32Array(3), new Float32Array(4), 1, false)).toThrow(
        /array lengths do not match/,
      )
    })
  },
)
