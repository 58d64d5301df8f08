import { availableParallelism } from 'node:os'
import * as tf from '@tensorflow/tfjs'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { initBackend } from '../backend.js'
import { isLevanterError } from '../errors.js'
import { maskedCrossEntropy } from '../loss.js'
import { Gpt2LM } from '../models/lm.js'
import { AdamW, AdamWConfig } from '../optim/adamw.js'
import { nativeGemm, replicaThreadsEnv, threadCount } from './native-gemm.js'
import type { NativeGemmAddon } from './native-addon.js'
import { selectGemm } from './wasm-gemm.js'

const addon = nativeGemm().addon
const it = test.skipIf(!addon)
const ops = addon as NativeGemmAddon

/** Deterministic values in [-s, s). */
function rand(n: number, seed: number, s = 1): Float32Array {
  const out = new Float32Array(n)
  let x = seed * 2654435761
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) % 2147483648
    out[i] = (x / 2147483648 - 0.5) * 2 * s
  }
  return out
}

function close(got: ArrayLike<number>, want: ArrayLike<number>, tol: number, what: string): void {
  expect(got.length, what).toBe(want.length)
  for (let i = 0; i < want.length; i++) {
    const err = Math.abs(got[i]! - want[i]!)
    if (!(err <= tol * (1 + Math.abs(want[i]!)))) throw new Error(`${what}[${i}]: got ${got[i]}, want ${want[i]}`)
  }
}

const bytes = (t: Float32Array) => Buffer.from(t.buffer, t.byteOffset, t.byteLength)

/** `f` run at 1 thread and at 3: the outputs it returns must be the same bits. */
function sameOnThreads(f: () => Float32Array[]): Float32Array[] {
  ops.setThreads(1)
  const one = f()
  ops.setThreads(3)
  const three = f()
  ops.setThreads(threadCount())
  three.forEach((t, i) => expect(bytes(t).equals(bytes(one[i]!))).toBe(true))
  return one
}

const gate = (x: number) => 1 / (1 + Math.exp(-2 * Math.sqrt(2 / Math.PI) * (x + 0.044715 * x ** 3)))

// Rows and widths around the kernels' edges: a width below one 8-float vector, ragged widths, a
// row count past a 32-row block, and one big enough to split over threads.
const SHAPES: [rows: number, width: number][] = [
  [1, 1],
  [3, 7],
  [33, 9],
  [70, 24],
  [300, 257],
]

describe('native kernels against float64 references', () => {
  it.each(SHAPES)('LayerNorm forward and backward, %i rows of %i', (rows, D) => {
    const x = rand(rows * D, 1, 3),
      g = rand(D, 2),
      b = rand(D, 3),
      dy = rand(rows * D, 4)
    const [y, xh, rs, dx, dg, db] = sameOnThreads(() => {
      const out = [rows * D, rows * D, rows, rows * D, D, D].map((n) => new Float32Array(n))
      ops.layerNormForward(x, g, b, 1e-5, out[0]!, out[1]!, out[2]!)
      ops.layerNormBackward(dy, out[1]!, out[2]!, g, out[3]!, out[4]!, out[5]!)
      return out
    })
    const wy = new Float64Array(rows * D),
      wdx = new Float64Array(rows * D),
      wdg = new Float64Array(D),
      wdb = new Float64Array(D)
    for (let r = 0; r < rows; r++) {
      const row = Array.from(x.subarray(r * D, (r + 1) * D))
      const mean = row.reduce((s, v) => s + v, 0) / D
      const rstd = 1 / Math.sqrt(row.reduce((s, v) => s + (v - mean) ** 2, 0) / D + 1e-5)
      const h = row.map((v) => (v - mean) * rstd)
      const dxh = h.map((_, j) => dy[r * D + j]! * g[j]!)
      const m1 = dxh.reduce((s, v) => s + v, 0) / D,
        m2 = dxh.reduce((s, v, j) => s + v * h[j]!, 0) / D
      for (let j = 0; j < D; j++) {
        wy[r * D + j] = h[j]! * g[j]! + b[j]!
        wdx[r * D + j] = rstd * (dxh[j]! - m1 - h[j]! * m2)
        wdg[j]! += dy[r * D + j]! * h[j]!
        wdb[j]! += dy[r * D + j]!
      }
    }
    close(y!, wy, 1e-5, 'y')
    expect(xh!.length).toBe(rows * D)
    expect(rs!.length).toBe(rows)
    close(dx!, wdx, 1e-4, 'dx')
    close(dg!, wdg, 1e-5, 'dgain')
    close(db!, wdb, 1e-5, 'dbias')
  })

  it.each(SHAPES)('GELU (tanh) forward and backward, %i×%i values over ±10', (rows, D) => {
    const n = rows * D
    const x = rand(n, 5, 10),
      dy = rand(n, 6)
    const [y, dx] = sameOnThreads(() => {
      const out = [new Float32Array(n), new Float32Array(n)]
      ops.geluForward(x, out[0]!)
      ops.geluBackward(x, dy, out[1]!)
      return out
    })
    const k = Math.sqrt(2 / Math.PI)
    close(
      y!,
      Array.from(x, (v) => 0.5 * v * (1 + Math.tanh(k * (v + 0.044715 * v ** 3)))),
      2e-6,
      'gelu',
    )
    close(
      dx!,
      Array.from(x, (v, i) => {
        const s = gate(v)
        return dy[i]! * s * (1 + v * (1 - s) * (2 * k + 6 * 0.044715 * k * v * v))
      }),
      2e-6,
      'gelu grad',
    )
  })

  it.each(SHAPES)('causal softmax forward and backward, %i rows of %i keys', (rows, S) => {
    const T = Math.min(rows, 5),
      offset = Math.max(0, S - T)
    const n = Math.floor(rows / T) * T * S
    const x = rand(n, 7, 20),
      dy = rand(n, 8)
    const [y, dx] = sameOnThreads(() => {
      const out = [new Float32Array(n), new Float32Array(n)]
      ops.softmaxForward(x, out[0]!, S, T, offset, 0.3, true)
      ops.softmaxBackward(out[0]!, dy, out[1]!, S, 0.3)
      return out
    })
    const wy = new Float64Array(n),
      wdx = new Float64Array(n)
    for (let r = 0; r < n / S; r++) {
      const seen = Math.min(S, offset + (r % T) + 1)
      const row = Array.from(x.subarray(r * S, r * S + seen), (v) => v * 0.3)
      const m = Math.max(...row)
      const e = row.map((v) => Math.exp(v - m))
      const z = e.reduce((s, v) => s + v, 0)
      for (let j = 0; j < seen; j++) wy[r * S + j] = e[j]! / z
      let dot = 0
      for (let j = 0; j < S; j++) dot += wy[r * S + j]! * dy[r * S + j]!
      for (let j = 0; j < S; j++) wdx[r * S + j] = 0.3 * wy[r * S + j]! * (dy[r * S + j]! - dot)
    }
    close(y!, wy, 1e-6, 'softmax')
    close(dx!, wdx, 1e-6, 'softmax grad')
  })

  it('a row masked by an additive −1e9 bias gets the same bits as the same row masked causally', () => {
    const [B, H, T, S] = [2, 3, 5, 21]
    const x = rand(B * H * T * S, 18, 30),
      bias = new Float32Array(B * T * S)
    for (let b = 0; b < B; b++)
      for (let t = 0; t < T; t++) for (let s = S - T + t + 1; s < S; s++) bias[(b * T + t) * S + s] = -1e9
    const causal = new Float32Array(x.length),
      biased = new Float32Array(x.length)
    ops.softmaxForward(x, causal, S, T, S - T, 0.7, true)
    ops.softmaxBiasForward(x, bias, biased, S, T, H, 0.7)
    expect(bytes(biased).equals(bytes(causal))).toBe(true)
    expect(causal[S - 1]).toBe(0)
  })

  it.each(SHAPES)('cross-entropy and its gradient, %i rows of %i classes', (rows, V) => {
    const logits = rand(rows * V, 9, 8)
    const targets = Int32Array.from({ length: rows }, (_, r) => (r * 7) % V)
    const mask = Float32Array.from({ length: rows }, (_, r) => (r % 4 === 3 ? 0 : 1))
    const denom = 5
    let loss = 0
    const [grad] = sameOnThreads(() => {
      const g = new Float32Array(rows * V)
      loss = ops.crossEntropy(logits, targets, mask, denom, g)
      return [g]
    })
    let want = 0
    const wg = new Float64Array(rows * V)
    for (let r = 0; r < rows; r++) {
      const row = Array.from(logits.subarray(r * V, (r + 1) * V))
      const m = Math.max(...row)
      const z = row.reduce((s, v) => s + Math.exp(v - m), 0)
      want += (mask[r]! * (m + Math.log(z) - row[targets[r]!]!)) / denom
      for (let j = 0; j < V; j++)
        wg[r * V + j] = ((mask[r]! / denom) * (Math.exp(row[j]! - m) / z - (j === targets[r] ? 1 : 0))) as number
    }
    expect(Math.abs(loss - want)).toBeLessThan(1e-6 * (1 + want))
    close(grad!, wg, 1e-6, 'cross-entropy grad')
    expect(() =>
      ops.crossEntropy(
        logits,
        Int32Array.from(targets, () => V),
        mask,
        1,
        grad!,
      ),
    ).toThrow(/vocabulary/)
  })

  it.each([
    [1, 1, 1, 1],
    [2, 7, 3, 5],
    [3, 37, 2, 16],
  ])('attention straight from q/k/v (B %i, T %i, H %i, K %i): forward and backward', (B, T, H, K) => {
    const D = H * K,
      scale = 1 / Math.sqrt(K)
    const qkv = rand(B * T * 3 * D, 10),
      dout = rand(B * T * D, 11)
    const [out, , dqkv] = sameOnThreads(() => {
      const o = new Float32Array(B * T * D),
        p = new Float32Array(B * H * T * T),
        d = new Float32Array(B * T * 3 * D)
      ops.attentionForward(qkv, o, p, B, T, H, K, scale)
      ops.attentionBackward(qkv, p, dout, d, B, T, H, K, scale)
      return [o, p, d]
    })
    const at = (b: number, t: number, part: number, h: number, k: number) => (b * T + t) * 3 * D + part * D + h * K + k
    const wout = new Float64Array(B * T * D),
      wd = new Float64Array(B * T * 3 * D)
    for (let b = 0; b < B; b++) {
      for (let h = 0; h < H; h++) {
        const P: number[][] = []
        for (let t = 0; t < T; t++) {
          const s = Array.from({ length: t + 1 }, (_, u) => {
            let dot = 0
            for (let k = 0; k < K; k++) dot += qkv[at(b, t, 0, h, k)]! * qkv[at(b, u, 1, h, k)]!
            return dot * scale
          })
          const m = Math.max(...s)
          const e = s.map((v) => Math.exp(v - m))
          const z = e.reduce((a, v) => a + v, 0)
          P.push(e.map((v) => v / z))
        }
        for (let t = 0; t < T; t++) {
          const dO = (k: number) => dout[(b * T + t) * D + h * K + k]!
          const dP = P[t]!.map((_, u) => {
            let dot = 0
            for (let k = 0; k < K; k++) dot += dO(k) * qkv[at(b, u, 2, h, k)]!
            return dot
          })
          const rowDot = P[t]!.reduce((a, p, u) => a + p * dP[u]!, 0)
          const dS = P[t]!.map((p, u) => scale * p * (dP[u]! - rowDot))
          for (let k = 0; k < K; k++) {
            for (let u = 0; u <= t; u++) {
              wout[(b * T + t) * D + h * K + k]! += P[t]![u]! * qkv[at(b, u, 2, h, k)]!
              wd[at(b, t, 0, h, k)]! += dS[u]! * qkv[at(b, u, 1, h, k)]!
              wd[at(b, u, 1, h, k)]! += dS[u]! * qkv[at(b, t, 0, h, k)]!
              wd[at(b, u, 2, h, k)]! += P[t]![u]! * dO(k)
            }
          }
        }
      }
    }
    close(out!, wout, 1e-5, 'attention out')
    close(dqkv!, wd, 1e-5, 'attention dqkv')
  })

  it.each([
    [1, 1, 1, 8, 0, [0]],
    [3, 4, 2, 12, 7, [7, 2, 0]],
    [2, 6, 1, 5, 3, [1, 3]],
  ])(
    'decode attention (B %i, H %i, Hkv %i, K %i, S %i): the cache grown by a column, each row over its own columns',
    (B, H, Hkv, K, S, cached) => {
      const lengths = Int32Array.from(cached as number[])
      const qStride = H * K + 3,
        kvStride = 2 * Hkv * K + 1,
        scale = 1 / Math.sqrt(K)
      const q = rand(B * qStride, 20),
        kv = rand(B * kvStride, 21),
        pastK = rand(B * Hkv * S * K, 22),
        pastV = rand(B * Hkv * S * K, 23)
      const [outK, outV, out] = sameOnThreads(() => {
        const ok = new Float32Array(B * Hkv * (S + 1) * K),
          ov = new Float32Array(ok.length),
          o = new Float32Array(B * H * K)
        ops.decodeAttention!(
          q,
          kv,
          kv.subarray(Hkv * K),
          pastK,
          pastV,
          lengths,
          ok,
          ov,
          o,
          H,
          Hkv,
          K,
          qStride,
          kvStride,
          scale,
        )
        return [ok, ov, o]
      })
      const g = H / Hkv
      const want = new Float64Array(B * H * K)
      for (let b = 0; b < B; b++)
        for (let hk = 0; hk < Hkv; hk++) {
          // the grown cache: the past columns, then the new one
          const col = (t: Float32Array, past: Float32Array, off: number, s: number, k: number) =>
            s < S ? past[((b * Hkv + hk) * S + s) * K + k]! : t[b * kvStride + off + hk * K + k]!
          for (let s = 0; s <= S; s++)
            for (let k = 0; k < K; k++) {
              const at = ((b * Hkv + hk) * (S + 1) + s) * K + k
              expect(outK![at]).toBe(col(kv, pastK, 0, s, k))
              expect(outV![at]).toBe(col(kv, pastV, Hkv * K, s, k))
            }
          for (let h = hk * g; h < (hk + 1) * g; h++) {
            const seen = Array.from({ length: lengths[b]! + 1 }, (_, j) => S - lengths[b]! + j)
            const sc = seen.map((s) => {
              let dot = 0
              for (let k = 0; k < K; k++) dot += q[b * qStride + h * K + k]! * col(kv, pastK, 0, s, k)
              return dot * scale
            })
            const m = Math.max(...sc)
            const e = sc.map((v) => Math.exp(v - m))
            const z = e.reduce((a, v) => a + v, 0)
            seen.forEach((s, j) => {
              for (let k = 0; k < K; k++) want[b * H * K + h * K + k]! += (e[j]! / z) * col(kv, pastV, Hkv * K, s, k)
            })
          }
        }
      close(out!, want, 1e-5, 'decode attention out')
    },
  )

  it('decode attention refuses a row with more cached columns than the cache has', () => {
    // one row, one head of 4: a cache of 2 columns grows to 3
    const run = (cached: number) =>
      ops.decodeAttention!(
        new Float32Array(4),
        new Float32Array(4),
        new Float32Array(4),
        new Float32Array(8),
        new Float32Array(8),
        Int32Array.from([cached]),
        new Float32Array(12),
        new Float32Array(12),
        new Float32Array(4),
        1,
        1,
        4,
        4,
        4,
        0.5,
      )
    expect(() => run(2)).not.toThrow()
    expect(() => run(3)).toThrow(/lengths do not match/)
    expect(() => run(-1)).toThrow(/lengths do not match/)
  })

  it.each([
    [1, 1, 1],
    [7, 300, 21],
    [200, 40, 70],
  ])("affine x·w + b, %i rows, %i in, %i out (the bias as the GEMM's start)", (N, inDim, outDim) => {
    const x = rand(N * inDim, 15),
      w = rand(inDim * outDim, 16),
      b = rand(outDim, 17)
    const [y] = sameOnThreads(() => {
      const o = new Float32Array(N * outDim)
      ops.affineForward(x, w, b, o)
      return [o]
    })
    const want = new Float64Array(N * outDim)
    for (let r = 0; r < N; r++)
      for (let j = 0; j < outDim; j++) {
        let t = b[j]!
        for (let k = 0; k < inDim; k++) t += x[r * inDim + k]! * w[k * outDim + j]!
        want[r * outDim + j] = t
      }
    close(y!, want, 1e-5, 'affine')
  })

  it('column sums in float64 blocks, and the same bits on any thread count', () => {
    const x = rand(301 * 19, 12, 100)
    const [s] = sameOnThreads(() => {
      const o = new Float32Array(19)
      ops.columnSum(x, o)
      return [o]
    })
    const want = Array.from({ length: 19 }, (_, j) => {
      let t = 0
      for (let r = 0; r < 301; r++) t += x[r * 19 + j]!
      return t
    })
    close(s!, want, 1e-6, 'column sum')
  })

  it('a wrong array type or length is a RangeError naming the kernel, and nothing is written', () => {
    const y = new Float32Array(4)
    expect(() => ops.geluForward(new Float64Array(4) as unknown as Float32Array, y)).toThrow(/geluForward/)
    expect(() => ops.geluForward(new Float32Array(5), y)).toThrow(/lengths/)
    expect(y.every((v) => v === 0)).toBe(true)
  })
})

describe('native GEMM on several threads', () => {
  beforeAll(async () => {
    await initBackend('wasm')
  })
  afterAll(() => selectGemm(undefined))

  it.each([
    ['split by rows', [300, 70], [70, 90], false, false],
    ['split by column panels (one row)', [1, 300], [300, 700], false, true],
    ['split by batch', [8, 40, 30], [8, 30, 50], true, false],
  ] as const)('%s: the same bits as one thread', (_, shapeA, shapeB, tA, tB) => {
    const sa: number[] = [...shapeA],
      sb: number[] = [...shapeB]
    const a = tf.tensor(
      rand(
        sa.reduce((p, q) => p * q, 1),
        13,
      ),
      sa,
    )
    const b = tf.tensor(
      rand(
        sb.reduce((p, q) => p * q, 1),
        14,
      ),
      sb,
    )
    const fa = tA ? tf.transpose(a, sa.length === 3 ? [0, 2, 1] : [1, 0]) : a
    const fb = tB ? tf.transpose(b, sb.length === 3 ? [0, 2, 1] : [1, 0]) : b
    selectGemm('native')
    sameOnThreads(() => [tf.matMul(fa, fb, tA, tB).dataSync() as Float32Array])
  })

  const avx512 =
    addon !== undefined &&
    (() => {
      const was = ops.setIsa()
      try {
        return ops.setIsa('avx512') === 'avx512'
      } catch {
        return false
      } finally {
        ops.setIsa(was)
      }
    })()
  test.skipIf(!avx512).each([
    ['12×32 tiles and ragged edges', [37, 300], [300, 71], false, false],
    ['transposed operands past one pass', [300, 25], [90, 300], true, true],
    ['batched attention shapes', [6, 33, 16], [6, 16, 33], false, false],
  ] as const)('the AVX-512 and AVX2 kernels give the same bits: %s', (_, sa, sb, tA, tB) => {
    const a = tf.tensor(
      rand(
        sa.reduce((p, q) => p * q, 1),
        19,
      ),
      [...sa],
    )
    const b = tf.tensor(
      rand(
        sb.reduce((p, q) => p * q, 1),
        20,
      ),
      [...sb],
    )
    selectGemm('native')
    const was = ops.setIsa()
    try {
      ops.setIsa('avx2')
      const narrow = tf.matMul(a, b, tA, tB).dataSync() as Float32Array
      ops.setIsa('avx512')
      const wide = tf.matMul(a, b, tA, tB).dataSync() as Float32Array
      expect(bytes(wide).equals(bytes(narrow))).toBe(true)
    } finally {
      ops.setIsa(was)
    }
  })

  it('LEVANTER_THREADS: every core by default, a share of them per local replica, a bad value BAD_CONFIG', () => {
    expect(threadCount(undefined)).toBe(availableParallelism())
    expect(threadCount('2')).toBe(2)
    const saved = process.env.LEVANTER_THREADS
    try {
      delete process.env.LEVANTER_THREADS
      expect(replicaThreadsEnv(2)).toEqual({ LEVANTER_THREADS: String(Math.max(1, availableParallelism() >> 1)) })
      expect(replicaThreadsEnv(1000)).toEqual({ LEVANTER_THREADS: '1' })
      process.env.LEVANTER_THREADS = '3'
      expect(replicaThreadsEnv(2)).toEqual({ LEVANTER_THREADS: '3' })
    } finally {
      if (saved === undefined) delete process.env.LEVANTER_THREADS
      else process.env.LEVANTER_THREADS = saved
    }
    for (const bad of ['0', '1.5', 'two', '65']) {
      let err: unknown
      try {
        threadCount(bad)
      } catch (e) {
        err = e
      }
      expect(isLevanterError(err, 'BAD_CONFIG')).toBe(true)
      expect(String(err)).toContain('LEVANTER_THREADS')
    }
  })
})

describe('a GPT-2 step on the native kernels', () => {
  beforeAll(async () => {
    await initBackend('wasm')
  })
  afterAll(() => selectGemm(undefined))

  const config = { vocabSize: 61, seqLen: 19, dModel: 24, nLayers: 2, nHeads: 3 }
  const ids = () =>
    tf.tensor2d(
      Array.from({ length: 38 }, (_, i) => (i * 7) % 61),
      [2, 19],
      'int32',
    )
  const targets = () =>
    tf.tensor2d(
      Array.from({ length: 38 }, (_, i) => (i * 5 + 1) % 61),
      [2, 19],
      'int32',
    )
  const mask = () =>
    tf.tensor2d(
      Array.from({ length: 38 }, (_, i) => (i % 5 === 4 ? 0 : 1)),
      [2, 19],
    )

  it('loss and gradients equal the all-WebAssembly path within 1e-5', () => {
    const model = new Gpt2LM(config, 0)
    const vars = [...model.params.values()]
    const run = () => tf.variableGrads(() => maskedCrossEntropy(model.forward(ids()), targets(), mask()), vars)
    selectGemm('native')
    const native = run()
    selectGemm('fma')
    const wasm = run()
    expect(Math.abs(native.value.dataSync()[0]! - wasm.value.dataSync()[0]!)).toBeLessThan(1e-6)
    for (const [name, g] of Object.entries(wasm.grads)) {
      const scale = tf.max(tf.abs(g)).dataSync()[0]!
      close(native.grads[name]!.dataSync(), g.dataSync(), 1e-5 * (1 + scale), name)
    }
    model.dispose()
  })

  it('AdamW on the native kernels writes the same bits as the JS update', () => {
    const grads = new Map<string, tf.Tensor>()
    const models = [new Gpt2LM(config, 0), new Gpt2LM(config, 0)]
    for (const [name, p] of models[0]!.params) grads.set(name, tf.tensor(rand(p.size, name.length, 0.01), p.shape))
    const config0 = AdamWConfig.parse({ maxGradNorm: null })
    const [onNative, onJs] = models.map((m) => new AdamW(config0, m)) as [AdamW, AdamW]
    for (let step = 0; step < 3; step++) {
      selectGemm('native')
      onNative.apply(grads, 1e-2)
      selectGemm('fma')
      onJs.apply(grads, 1e-2)
    }
    for (const [name, p] of models[0]!.params) {
      const q = models[1]!.params.get(name)!
      expect(bytes(p.dataSync() as Float32Array).equals(bytes(q.dataSync() as Float32Array)), name).toBe(true)
      expect(bytes(onNative.m.get(name)!).equals(bytes(onJs.m.get(name)!)), name).toBe(true)
    }
    for (const m of models) m.dispose()
  })
})

describe('provenance', () => {
  it('the wasm backend reports the native GEMM, its instruction set and its threads', async () => {
    const info = await initBackend('wasm')
    expect(info.gemm).toBe('native')
    expect(info.native).toEqual({ isa: ops.setIsa(), threads: threadCount() })
  })
})
