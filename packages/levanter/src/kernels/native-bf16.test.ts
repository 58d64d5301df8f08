import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { LevanterError } from '../errors.js'
import { bf16Kernel, bf16ProductsUnavailable, bf16Unavailable, gemmBf16, hasBf16 } from './native-gemm.js'

// The native bf16 GEMM (native/gemm-bf16.cc: operands rounded to bfloat16, vdpbf16ps with float32 sums) at ragged
// shapes, the vocab head's N = 50257 included: against a float64 product of the bf16-rounded operands (then only the
// float32 accumulation differs: |err| ≤ (K + 2)·2^-24·Σ|a||b|), and against the float64 product of the float32
// operands within bf16's rounding (bf16 keeps 8 significant bits: each operand is off by ≤ 2^-8 relative, so
// |err| ≤ 2^-7·Σ|a||b| plus the above).
const why = bf16Unavailable()
const bits = new Uint32Array(1)
const f32 = new Float32Array(bits.buffer)

/** PyTorch's float → bfloat16 → float: round to nearest even, NaN quiet. */
function bf16(x: number): number {
  f32[0] = x
  const u = bits[0]!
  const nan = (u & 0x7fffffff) > 0x7f800000
  bits[0] = nan ? (((u >>> 16) & 0x8000) | 0x7fc0) << 16 : ((u + 0x7fff + ((u >>> 16) & 1)) >>> 16) << 16
  return f32[0]!
}

function fill(n: number, seed: number): Float32Array {
  const out = new Float32Array(n)
  let s = seed >>> 0
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0
    out[i] = (s / 2 ** 31 - 1) * (1 + (i % 5))
  }
  return out
}

/** The columns checked: all, or for the vocab head every 61st and the last few. */
function columns(N: number): number[] {
  const cols: number[] = []
  for (let j = 0; j < N; j += N > 4096 ? 61 : 1) cols.push(j)
  for (let j = Math.max(0, N - 5); j < N; j++) if (!cols.includes(j)) cols.push(j)
  return cols
}

function check(M: number, K: number, N: number, tA = false, tB = false): void {
  const a = fill(M * K, M * 7 + K),
    b = fill(K * N, N * 3 + K)
  const c = gemmBf16(a, b, M, K, N, { tA, tB })
  const A = (i: number, k: number) => a[tA ? k * M + i : i * K + k]!
  const B = (k: number, j: number) => b[tB ? j * K + k : k * N + j]!
  // rounded where read: the head's B has 39 M elements, of which the checked columns read 1 in 61
  const Ar = (i: number, k: number) => bf16(A(i, k))
  const Br = (k: number, j: number) => bf16(B(k, j))
  for (let i = 0; i < M; i++)
    for (const j of columns(N)) {
      let ref = 0,
        exact = 0,
        mag = 0
      for (let k = 0; k < K; k++) {
        ref += Ar(i, k) * Br(k, j)
        exact += A(i, k) * B(k, j)
        mag += Math.abs(A(i, k) * B(k, j))
      }
      const got = c[i * N + j]!
      const acc = (K + 2) * 2 ** -24 * mag * 1.01
      if (!(Math.abs(got - ref) <= acc))
        throw new Error(`[${M},${K}]x[${K},${N}] (${i},${j}): ${got} vs bf16-operand reference ${ref}, bound ${acc}`)
      if (!(Math.abs(got - exact) <= 2 ** -7 * mag * 1.01 + acc))
        throw new Error(`[${M},${K}]x[${K},${N}] (${i},${j}): ${got} vs fp32-operand reference ${exact}`)
    }
}

// Each kernel: AMX tiles (tdpbf16ps, where the CPU has them), vdpbf16ps (LEVANTER_BF16_AMX=0, read per product), and
// the AVX2 emulation (native/gemm-bf16-emu.cc: the CPU lacks AVX512_BF16, or LEVANTER_BF16_EMULATE=1, read when bf16
// is switched on), which runs wherever the native GEMM does.
const products = bf16ProductsUnavailable()
const kernels = [
  { name: 'AMX', env: { LEVANTER_BF16_AMX: '1' }, skip: why, kernel: ['amx', 'vdpbf16ps'] },
  { name: 'vdpbf16ps', env: { LEVANTER_BF16_AMX: '0' }, skip: why, kernel: ['vdpbf16ps'] },
  { name: 'emulated', env: { LEVANTER_BF16_EMULATE: '1' }, skip: products, kernel: ['emulated'] },
] as const
for (const { name, env, skip, kernel } of kernels)
  describe.skipIf(skip !== undefined)(`native bf16 GEMM, ${name}${skip ? ` (skipped: ${skip})` : ''}`, () => {
    beforeAll(() => {
      Object.assign(process.env, env)
    })
    afterAll(() => {
      for (const k of Object.keys(env)) delete process.env[k]
    })

    test(`bf16Kernel answers ${kernel.join(' or ')}`, () => expect(kernel).toContain(bf16Kernel()))
    if (name !== 'emulated') test('hasBf16 answers true here', () => expect(hasBf16()).toBe(true))

    // the emulation's denormal handling, as the SDM gives vdpbf16ps's and tdpbf16ps's (the hardware kernels' own
    // behaviour is not asserted: not yet run on a CPU that has them)
    test.skipIf(name !== 'emulated')('denormal inputs read as zero, denormal sums flushed (as the SDM says)', () => {
      // 2^-130 is a bfloat16 denormal, read as 0: 2^-130·2^100 is 0, not 2^-30; 2^-70·2^-60 = 2^-130 is a
      // denormal result, flushed to 0; 2^-70·2^100 = 2^30 is kept
      const c = gemmBf16(Float32Array.of(2 ** -130, 2 ** -70), Float32Array.of(2 ** 100, 2 ** -60), 2, 1, 2)
      expect(Array.from(c)).toEqual([0, 0, 2 ** 30, 0])
    })

    test('rounds operands to nearest even, as PyTorch', () => {
      // 1 + 2^-8 is halfway between bf16's 1 and 1 + 2^-7: even is 1; 1 + 3·2^-8 is halfway to 1 + 2^-6 (even)
      const c = gemmBf16(
        Float32Array.of(1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 + 2 ** -8 + 2 ** -20),
        Float32Array.of(1),
        3,
        1,
        1,
      )
      expect(Array.from(c)).toEqual([1, 1 + 2 ** -6, 1 + 2 ** -7])
      expect(bf16(1 + 2 ** -8)).toBe(1)
    })

    for (const M of [1, 2, 3, 4, 5, 17, 64])
      for (const K of [1, 7, 768, 777])
        test(`[${M}, ${K}] x [${K}, 1 | 13]`, () => {
          check(M, K, 1)
          check(M, K, 13)
        })

    for (const [M, K] of [
      [1, 768],
      [5, 7],
      [17, 777],
    ] as const)
      test(`vocab head [${M}, ${K}] x [${K}, 50257]`, () => check(M, K, 50257), 120_000) // a shared machine: slow

    test('transposed operands read in place', () => {
      check(17, 777, 13, true, false)
      check(5, 768, 50, false, true)
      check(64, 7, 33, true, true)
    })

    test('a row alone equals that row inside a larger product, bit for bit', () => {
      const a = fill(64 * 777, 1),
        b = fill(777 * 50, 2)
      const all = gemmBf16(a, b, 64, 777, 50)
      const row = gemmBf16(a.subarray(37 * 777, 38 * 777), b, 1, 777, 50)
      expect(Array.from(row)).toEqual(Array.from(all.subarray(37 * 50, 38 * 50)))
    })
  })

test('without the native GEMM, gemmBf16 is a BAD_CONFIG saying why', () => {
  const before = process.env.LEVANTER_NATIVE_DISABLE
  process.env.LEVANTER_NATIVE_DISABLE = '1'
  try {
    expect(() => gemmBf16(new Float32Array(1), new Float32Array(1), 1, 1, 1)).toThrow(LevanterError)
    expect(() => gemmBf16(new Float32Array(1), new Float32Array(1), 1, 1, 1)).toThrow(/LEVANTER_NATIVE_DISABLE/)
  } finally {
    if (before === undefined) delete process.env.LEVANTER_NATIVE_DISABLE
    else process.env.LEVANTER_NATIVE_DISABLE = before
  }
})
