import { spawnSync } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import * as tf from '@tensorflow/tfjs'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { initBackend } from '../backend.js'
import { isLevanterError } from '../errors.js'
import { assembleGemm } from '../../scripts/gemm-assemble.js'
import { KC, NC } from './gemm-wat.js'
import { registerLevanterKernels, unregisterLevanterKernels } from './register.js'
import { NATIVE_BLOCKING, nativeGemm } from './native-gemm.js'
import { matMulT } from './transpose-last.js'
import { chooseGemmBuild, GEMM_BUILDS, gemmBytes, gemmFor, selectGemm, transposeIsFree } from './wasm-gemm.js'
import type { WasmModuleLike } from './wasm-gemm.js'

type Case = { sa: number[]; sb: number[]; tA: boolean; tB: boolean }
const rand = (shape: number[], seed: number) => tf.randomUniform(shape, -1, 1, 'float32', seed)

/** a·b (with flags) in float64 from the operands' values: the reference every build is held to. */
function reference(
  { sa, sb, tA, tB }: Case,
  a: Float32Array,
  b: Float32Array,
): { shape: number[]; values: Float64Array } {
  const [M, K] = tA ? [sa.at(-1)!, sa.at(-2)!] : [sa.at(-2)!, sa.at(-1)!]
  const N = tB ? sb.at(-2)! : sb.at(-1)!
  const ba = sa.slice(0, -2).reduce((p, q) => p * q, 1),
    bb = sb.slice(0, -2).reduce((p, q) => p * q, 1)
  const batch = Math.max(ba, bb)
  const outer = ba >= bb ? sa.slice(0, -2) : sb.slice(0, -2)
  const out = new Float64Array(batch * M * N)
  for (let i = 0; i < batch; i++) {
    const ao = ba === 1 ? 0 : i * M * K,
      bo = bb === 1 ? 0 : i * K * N
    for (let m = 0; m < M; m++) {
      for (let n = 0; n < N; n++) {
        let s = 0
        for (let k = 0; k < K; k++) s += a[ao + (tA ? k * M + m : m * K + k)]! * b[bo + (tB ? n * K + k : k * N + n)]!
        out[i * M * N + m * N + n] = s
      }
    }
  }
  return { shape: [...outer, M, N], values: out }
}

// Shapes around every edge of the blocking: few rows (no packing), rows not a multiple of the tile, columns past a
// panel and past a packed block (NC), depth past one pass (KC), batches and broadcasts.
const CASES: [string, Case][] = [
  ['one element', { sa: [1, 1], sb: [1, 1], tA: false, tB: false }],
  ['a whole tile', { sa: [8, 8], sb: [8, 8], tA: false, tB: false }],
  [
    'few rows (B read in place), deeper than a pass, ragged columns',
    { sa: [3, KC + 10], sb: [KC + 10, 21], tA: false, tB: false },
  ],
  ['few rows, a transposed', { sa: [KC + 10, 2], sb: [KC + 10, 13], tA: true, tB: false }],
  ['ragged rows and columns', { sa: [5, 3], sb: [3, 7], tA: false, tB: false }],
  ['deeper than one pass', { sa: [13, KC + 44], sb: [KC + 44, 30], tA: false, tB: false }],
  ['wider than one block', { sa: [6, 9], sb: [9, NC + 17], tA: false, tB: false }],
  ['a transposed', { sa: [KC + 3, 10], sb: [KC + 3, 12], tA: true, tB: false }],
  ['b transposed', { sa: [9, 40], sb: [NC + 5, 40], tA: false, tB: true }],
  ['both transposed', { sa: [33, 7], sb: [11, 33], tA: true, tB: true }],
  ['batched', { sa: [3, 7, 5], sb: [3, 5, 9], tA: false, tB: false }],
  ['batched, b transposed (attention scores)', { sa: [2, 3, 6, 8], sb: [2, 3, 6, 8], tA: false, tB: true }],
  ['batched, a transposed', { sa: [4, 10, 6], sb: [4, 10, 3], tA: true, tB: false }],
  ['right operand broadcast', { sa: [2, 3, 6, 5], sb: [5, 4], tA: false, tB: false }],
  ['right operand broadcast, a transposed', { sa: [3, 5, 6], sb: [5, 4], tA: true, tB: false }],
  ['left operand broadcast, b transposed', { sa: [6, 5], sb: [3, 4, 5], tA: false, tB: true }],
]

// The native GEMM's own edges (native/gemm.cc: 6×16 tiles, MC rows of A and NC columns of B per packed block).
const { MR: NMR, MC: NMC, NC: NNC, KC: NKC, GROUP: NGROUP, SMALL_L2 } = NATIVE_BLOCKING
const NATIVE_CASES: [string, Case][] = [
  ['one tile of rows and one more', { sa: [NMR + 1, 19], sb: [19, 33], tA: false, tB: false }],
  ['more rows than a packed block', { sa: [NMC + 7, 20], sb: [20, 17], tA: false, tB: false }],
  ['wider than a native block', { sa: [7, 5], sb: [5, NNC + 19], tA: false, tB: false }],
  // the AVX2 kernel's blocks on a small L2: past its wider block of B (transposed and not), past a group of its passes
  ['wider than a small-L2 block, b transposed', { sa: [7, 9], sb: [SMALL_L2.NC + 19, 9], tA: false, tB: true }],
  [
    'past a small-L2 group of passes and its rows, a transposed',
    { sa: [SMALL_L2.GROUP * NKC + 37, SMALL_L2.MC + 11], sb: [SMALL_L2.GROUP * NKC + 37, 21], tA: true, tB: false },
  ],
  ['deeper than a native pass, both transposed', { sa: [NKC + 21, 14], sb: [35, NKC + 21], tA: true, tB: true }],
  // a tile of C runs a group of passes back to back: past one group, ragged in every dimension
  [
    'deeper than a group of passes',
    { sa: [2 * NMR + 5, NGROUP * NKC + 37], sb: [NGROUP * NKC + 37, 45], tA: false, tB: false },
  ],
  ['full tiles, a transposed (weight gradients)', { sa: [NKC + 3, 2 * NMR], sb: [NKC + 3, 32], tA: true, tB: false }],
  ['full tiles, b transposed', { sa: [2 * NMR, 40], sb: [48, 40], tA: false, tB: true }],
  // the vocabulary head's shape, ragged: packing's 16×16 transposes (A's rows, B's columns) and their scalar tails
  ['a vocabulary head, b transposed', { sa: [4 * NMR + 1, 70], sb: [50257, 70], tA: false, tB: true }],
  ['its input gradient (K 50257)', { sa: [4 * NMR + 1, 50257], sb: [50257, 19], tA: false, tB: false }],
  ['batched with a left broadcast, both transposed', { sa: [9, 13], sb: [3, 17, 9], tA: true, tB: true }],
  ['batched with a right broadcast, b transposed', { sa: [2, 3, 13, 9], sb: [17, 9], tA: false, tB: true }],
]
const native = nativeGemm()
// Where the install could build it (x86-64 Linux with a C++ compiler, a CPU with AVX2 and FMA), it must have
// (unless LEVANTER_NATIVE_DISABLE=1 turns it off, to run the suite on the WebAssembly GEMM).
const buildable =
  process.env.LEVANTER_NATIVE_DISABLE !== '1' &&
  process.arch === 'x64' &&
  existsSync('/proc/cpuinfo') &&
  /\bavx2\b/.test(readFileSync('/proc/cpuinfo', 'utf8')) &&
  /\bfma\b/.test(readFileSync('/proc/cpuinfo', 'utf8')) &&
  spawnSync(process.env.CXX || 'c++', ['--version']).status === 0
const BUILDS = [...(native.addon ? (['native'] as const) : []), ...GEMM_BUILDS] as const

describe('levanter GEMM', () => {
  beforeAll(async () => {
    await initBackend('wasm')
  })
  afterAll(async () => {
    selectGemm(undefined)
    await tf.setBackend('wasm')
    registerLevanterKernels()
  })

  test.each(GEMM_BUILDS)('the committed %s module is what the generator assembles', async (build) => {
    expect(
      Buffer.from(gemmBytes(build)).equals(Buffer.from(await assembleGemm(build))),
      'run pnpm --filter @marin/levanter build:gemm',
    ).toBe(true)
  })

  test.runIf(buildable)('the native GEMM is built and runs where it can (x86-64, AVX2 and FMA, a compiler)', () => {
    expect(native.reason).toBeUndefined()
  })

  for (const build of [...BUILDS, 'xnnpack'] as const) {
    test.each(build === 'native' ? [...CASES, ...NATIVE_CASES] : CASES)(`${build}: %s`, async (_, c) => {
      await tf.setBackend('wasm')
      selectGemm(build)
      const a = rand(c.sa, 1),
        b = rand(c.sb, 2)
      const ours = tf.matMul(a, b, c.tA, c.tB)
      const ref = reference(c, a.dataSync() as Float32Array, b.dataSync() as Float32Array)
      expect(ours.shape).toEqual(ref.shape)
      const v = ours.dataSync()
      const K = c.tA ? c.sa.at(-2)! : c.sa.at(-1)!
      // float32 sums of K products of values in [-1, 1] against float64
      // (one expect for all: the vocabulary-sized cases have a million elements)
      const bad = ref.values.findIndex((y, i) => !(Math.abs(v[i]! - y) <= 2e-7 * K + 1e-6))
      expect(bad, `element ${bad}: ${v[bad]} against ${ref.values[bad]}`).toBe(-1)
      tf.dispose([a, b, ours])
    })
  }

  test(
    'each build gives the same numbers for a row whatever the rows ' +
      'and columns around it (cached decoding relies on it)',
    async () => {
      await tf.setBackend('wasm')
      for (const build of BUILDS) {
        selectGemm(build)
        const x = rand([9, KC + 40], 3),
          w = rand([KC + 40, 21], 4)
        const all = tf.matMul(x, w).arraySync() as number[][]
        const row = tf.matMul(tf.slice(x, [5, 0], [1, -1]), w).arraySync() as number[][]
        const cols = tf.matMul(x, tf.slice(w, [0, 3], [-1, 9])).arraySync() as number[][]
        expect(row[0]).toEqual(all[5])
        expect(cols).toEqual(all.map((r) => r.slice(3, 12)))
      }
    },
  )

  test('transposes are read in place only where the kernel runs: matMulT is right either way', async () => {
    await tf.setBackend('wasm')
    selectGemm('fma')
    expect(transposeIsFree()).toBe(true)
    const a = rand([7, 5], 5),
      b = rand([6, 5], 6)
    const flagged = matMulT(a, b, false, true).dataSync()
    selectGemm('xnnpack')
    expect(transposeIsFree()).toBe(false)
    const explicit = matMulT(a, b, false, true).dataSync()
    flagged.forEach((x, i) => expect(Math.abs(x - explicit[i]!)).toBeLessThan(1e-5))
    selectGemm('fma')
    unregisterLevanterKernels()
    expect(transposeIsFree()).toBe(false) // the stock BatchMatMul is back
    registerLevanterKernels()
    expect(transposeIsFree()).toBe(true)
    await tf.setBackend('cpu')
    expect(transposeIsFree()).toBe(false)
    await tf.setBackend('wasm')
    tf.dispose([a, b])
  })

  test.each(BUILDS)('%s: many products leave tensors, bytes and the heap where they were', async (build) => {
    await tf.setBackend('wasm')
    selectGemm(build)
    const backend = tf.backend() as unknown as { wasm: WasmModuleLike & { HEAPU8: Uint8Array } }
    expect(gemmFor(backend.wasm)).toBe(gemmFor(backend.wasm))
    const a = rand([300, 300], 7),
      b = rand([300, 200], 8)
    for (let i = 0; i < 3; i++) tf.matMul(a, b, false, false).dispose()
    const before = { ...tf.memory(), heap: backend.wasm.HEAPU8.length }
    for (let i = 0; i < 50; i++) tf.matMul(a, b, i % 2 === 0, false).dispose()
    expect({ ...tf.memory(), heap: backend.wasm.HEAPU8.length }).toEqual(before)
    tf.dispose([a, b])
  })

  test('LEVANTER_GEMM: a bad value names the variable and the choices; xnnpack turns the GEMM off', () => {
    expect(chooseGemmBuild('xnnpack')).toBeUndefined()
    expect(chooseGemmBuild('simd')).toBe('simd')
    // native where built and the CPU has AVX2/FMA; else fma (Node 20: relaxed SIMD behind a flag this module sets)
    expect(chooseGemmBuild(undefined)).toBe(native.addon ? 'native' : 'fma')
    try {
      chooseGemmBuild('avx512')
      expect.unreachable()
    } catch (e) {
      expect(isLevanterError(e, 'BAD_CONFIG')).toBe(true)
      expect((e as Error).message).toMatch(/LEVANTER_GEMM=avx512 is not one of native, fma, simd, xnnpack/)
    }
  })

  test.runIf(native.addon)('native: C = op(A)·op(B) overwrites, C += op(A)·op(B) accumulates', () => {
    const addon = native.addon!
    type MemoryCtor = new (d: { initial: number }) => { buffer: ArrayBuffer }
    const mem = new (globalThis as unknown as { WebAssembly: { Memory: MemoryCtor } }).WebAssembly.Memory({
      initial: 1,
    })
    const f = new Float32Array(mem.buffer)
    const [M, K, N] = [7, 300, 18]
    const [pa, pb, pc] = [0, M * K * 4, (M * K + K * N) * 4]
    for (let i = 0; i < M * K + K * N; i++) f[i] = Math.sin(i)
    const product = (m: number, n: number) => {
      let s = 0
      for (let k = 0; k < K; k++) s += f[m * K + k]! * f[M * K + k * N + n]!
      return s
    }
    f.fill(5, pc / 4, pc / 4 + M * N)
    addon.gemm(mem.buffer, pa, pb, pc, M, K, N, false, false, 1, 0, 0, 0, true)
    for (let i = 0; i < M * N; i++)
      expect(Math.abs(f[pc / 4 + i]! - 5 - product(Math.floor(i / N), i % N))).toBeLessThan(1e-4)
    f.fill(5, pc / 4, pc / 4 + M * N)
    addon.gemm(mem.buffer, pa, pb, pc, M, K, N, false, false, 1, 0, 0, 0, false)
    for (let i = 0; i < M * N; i++)
      expect(Math.abs(f[pc / 4 + i]! - product(Math.floor(i / N), i % N))).toBeLessThan(1e-4)
    expect(f[pc / 4 + M * N]).toBe(0) // nothing written past C
    expect(() => addon.gemm(mem.buffer, pa, pb, 65536 - 8, M, K, N, false, false, 1, 0, 0, 0, false)).toThrow(
      /past the end of the buffer/,
    )
  })

  test('LEVANTER_GEMM=native where the native GEMM cannot run: BAD_CONFIG naming why; the default falls back', () => {
    const saved = process.env.LEVANTER_NATIVE_DISABLE
    process.env.LEVANTER_NATIVE_DISABLE = '1'
    try {
      expect(nativeGemm().reason).toMatch(/LEVANTER_NATIVE_DISABLE/)
      expect(chooseGemmBuild(undefined)).toBe('fma')
      try {
        chooseGemmBuild('native')
        expect.unreachable()
      } catch (e) {
        expect(isLevanterError(e, 'BAD_CONFIG')).toBe(true)
        expect((e as Error).message).toMatch(
          /LEVANTER_GEMM=native: the native GEMM is unavailable \(disabled by LEVANTER_NATIVE_DISABLE=1\)/,
        )
      }
    } finally {
      if (saved === undefined) delete process.env.LEVANTER_NATIVE_DISABLE
      else process.env.LEVANTER_NATIVE_DISABLE = saved
    }
  })

  test('without the native addon a process multiplies on fma and trains without fused kernels; with it, native', () => {
    const script = fileURLToPath(new URL('../test-support/gemm-choice.ts', import.meta.url))
    const run = (env: Record<string, string>) => {
      const r = spawnSync(process.execPath, ['--import', 'tsx', script], {
        encoding: 'utf8',
        timeout: 120_000,
        env: { ...process.env, LEVANTER_GEMM: '', ...env },
      })
      expect(r.status, r.stderr).toBe(0)
      type Choice = { gemm: string; err: number; fused: boolean; loss: number; gradNorm: number }
      return JSON.parse(r.stdout.trim().split('\n').pop()!) as Choice
    }
    const off = run({ LEVANTER_NATIVE_DISABLE: '1' })
    expect(off.gemm).toBe('fma')
    expect(off.err).toBeLessThan(1e-4)
    expect(off.fused).toBe(false)
    if (native.addon) {
      const on = run({})
      expect(on.gemm).toBe('native')
      expect(on.err).toBeLessThan(1e-4)
      expect(on.fused).toBe(true)
      expect(Math.abs(on.loss - off.loss)).toBeLessThan(1e-5)
      expect(Math.abs(on.gradNorm - off.gradNorm)).toBeLessThan(1e-5 * off.gradNorm)
    }
  }, 150_000)
})
