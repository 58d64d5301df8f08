/**
 * levanter's WGSL kernels (src/webgpu/kernels/) on this machine's adapter (SwiftShader without a
 * GPU) against the composite tensor ops and the host AdamW on the cpu backend: values and
 * gradients, at shapes that are not multiples of a workgroup.
 */
import * as tf from '@tensorflow/tfjs'
import { beforeAll, describe, expect, test } from 'vitest'
import { initBackend } from '../backend.js'
import { columnSum } from '../kernels/column-sum.js'
import { fusedLayerNorm } from '../kernels/layer-norm.js'
import { fusedBiasSoftmax, fusedCausalSoftmax } from '../kernels/softmax.js'
import { matMulT } from '../kernels/transpose-last.js'
import { causalBias } from '../models/layers.js'
import { createModel } from '../models/lm.js'
import type { ModelConfigInput } from '../models/config.js'
import { AdamW, AdamWConfig } from '../optim/adamw.js'
import { DeviceAdamW } from '../optim/adamw-device.js'
import { Rng } from '../rng.js'

beforeAll(async () => {
  const info = await initBackend('webgpu')
  expect(info.name).toBe('webgpu')
}, 120_000)

/** Seeded normal values. */
function normals(n: number, seed: number, scale = 1): Float32Array {
  const r = new Rng(seed)
  return Float32Array.from({ length: n }, () => r.normal() * scale)
}

/** Run `f` on the cpu backend, then come back to webgpu. */
async function onCpu<T>(f: () => T | Promise<T>): Promise<T> {
  await tf.setBackend('cpu')
  try {
    return await f()
  } finally {
    await tf.setBackend('webgpu')
  }
}

/** The names of the tfjs kernels `f` runs. */
async function kernelsOf(f: () => tf.Tensor | tf.Tensor[]): Promise<string[]> {
  const p = await tf.profile(() => {
    const out = f()
    tf.dispose(out)
    return []
  })
  return p.kernels.map((k) => k.name)
}

function expectClose(got: ArrayLike<number>, want: ArrayLike<number>, tol: number, what: string): void {
  expect(got.length, what).toBe(want.length)
  let worst = 0
  for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(got[i]! - want[i]!))
  expect(worst, what).toBeLessThanOrEqual(tol)
}

describe('WGSL softmax', () => {
  // [rows, T, S, offset]: rows and widths off any workgroup size, a row wider than the workgroup
  const shapes: [number, number, number, number][] = [
    [3, 5, 7, 2],
    [2, 3, 131, 128],
    [5, 9, 9, 0],
  ]

  test.each(shapes)(
    'causal softmax [%i, %i, %i] at offset %i: values and gradient equal the composite on cpu',
    async (R, T, S, offset) => {
      const x = normals(R * T * S, 1, 3),
        dy = normals(R * T * S, 2)
      const scale = 0.37
      const run = (fused: boolean) => {
        const xt = tf.tensor3d(x, [R, T, S]),
          dyt = tf.tensor3d(dy, [R, T, S])
        const f = (a: tf.Tensor) =>
          fused ? fusedCausalSoftmax(a, scale, offset)! : tf.softmax(tf.add(tf.mul(a, scale), causalBias(T, S, offset)))
        const y = f(xt)
        const dx = tf.grad((a: tf.Tensor) => tf.sum(tf.mul(f(a), dyt)))(xt)
        return [y, dx]
      }
      expect(fusedCausalSoftmax(tf.zeros([R, T, S]), scale, offset)).toBeDefined()
      const names = await kernelsOf(() => run(true))
      expect(names).toContain('LevanterCausalSoftmax')
      expect(names).toContain('LevanterSoftmaxGrad')
      expect(names).not.toContain('Softmax')
      const [y, dx] = run(true)
      const got = [await y!.data(), await dx!.data()]
      tf.dispose([y!, dx!])
      const want = await onCpu(() => run(false).map((t) => t.dataSync()))
      expectClose(got[0]!, want[0]!, 1e-6, 'softmax')
      expectClose(got[1]!, want[1]!, 1e-6, 'gradient')
    },
  )

  test(
    'bias-masked softmax [B·H, T, S] with bias [B, 1, T, S]: values and gradient equal the composite on cpu, ' +
      'and a row gets the same bits as under the causal mask',
    async () => {
      const B = 2,
        H = 3,
        T = 4,
        S = 11,
        offset = S - T
      const x = normals(B * H * T * S, 3, 2),
        dy = normals(B * H * T * S, 4)
      const scale = 0.5
      // row b's queries at positions offset…offset+T-1 see keys ≤ their position;
      // batch row 1 also hides key 0 (padding)
      const bias = new Float32Array(B * T * S)
      for (let b = 0; b < B; b++)
        for (let t = 0; t < T; t++)
          for (let s = 0; s < S; s++) if (s > offset + t || (b === 1 && s === 0)) bias[(b * T + t) * S + s] = -1e9
      const run = (fused: boolean) => {
        const xt = tf.tensor3d(x, [B * H, T, S]),
          dyt = tf.tensor3d(dy, [B * H, T, S]),
          bt = tf.tensor4d(bias, [B, 1, T, S])
        const f = (a: tf.Tensor) =>
          fused
            ? fusedBiasSoftmax(a, scale, bt)!
            : tf.reshape(tf.softmax(tf.add(tf.reshape(tf.mul(a, scale), [B, H, T, S]), bt)), [B * H, T, S])
        const y = f(xt)
        const dx = tf.grad((a: tf.Tensor) => tf.sum(tf.mul(f(a), dyt)))(xt)
        return [y, dx]
      }
      const names = await kernelsOf(() => run(true))
      expect(names).toContain('LevanterBiasSoftmax')
      expect(names).not.toContain('Softmax')
      const [y, dx] = run(true)
      const got = [await y!.data(), await dx!.data()]
      const causal = fusedCausalSoftmax(tf.tensor3d(x, [B * H, T, S]), scale, offset)!
      const causalY = await causal.data()
      tf.dispose([y!, dx!, causal])
      const want = await onCpu(() => run(false).map((t) => t.dataSync()))
      expectClose(got[0]!, want[0]!, 1e-6, 'softmax')
      expectClose(got[1]!, want[1]!, 1e-6, 'gradient')
      // batch row 0 is causal at `offset`: bit for bit the causal kernel's rows
      expect(Array.from(got[0]!.subarray(0, H * T * S))).toEqual(Array.from(causalY.subarray(0, H * T * S)))
    },
  )
})

describe('WGSL LayerNorm', () => {
  // rows and widths off any workgroup size, one row wider than the workgroup
  test.each([
    [7, 37],
    [3, 300],
  ])('LayerNorm [%i, %i]: values and gradients for x, gain and bias equal the plain formula on cpu', async (N, D) => {
    const x = normals(N * D, 11, 2),
      g = normals(D, 12),
      b = normals(D, 13),
      w = normals(N * D, 14)
    const plain = (a: tf.Tensor, c: tf.Tensor, d: tf.Tensor) => {
      const { mean, variance } = tf.moments(a, -1, true)
      return tf.add(tf.mul(tf.mul(tf.sub(a, mean), tf.rsqrt(tf.add(variance, 1e-5))), c), d)
    }
    const run = (ln: typeof plain) => {
      const xs = [tf.tensor2d(x, [N, D]), tf.tensor1d(g), tf.tensor1d(b)] as const
      const wt = tf.tensor2d(w, [N, D])
      const loss = (a: tf.Tensor, c: tf.Tensor, d: tf.Tensor) => tf.sum(tf.mul(ln(a, c, d), wt))
      return [ln(...xs), ...tf.grads(loss)([...xs])]
    }
    const fused = (a: tf.Tensor, c: tf.Tensor, d: tf.Tensor) => fusedLayerNorm(a, c, d, 1e-5)
    const names = await kernelsOf(() => run(fused))
    expect(names).toContain('LevanterLayerNorm')
    expect(names).toContain('LevanterLayerNormGrad')
    expect(names).not.toContain('Mean')
    const outs = run(fused)
    const got: Float32Array[] = []
    for (const t of outs) got.push((await t.data()) as Float32Array)
    tf.dispose(outs)
    const want = await onCpu(() => run(plain).map((t) => t.dataSync()))
    ;['y', 'dx', 'dgain', 'dbias'].forEach((what, i) => {
      const scale = Math.max(1, ...Array.from(want[i]!, Math.abs))
      expectClose(got[i]!, want[i]!, 2e-6 * scale, what)
    })
  })
})

test.each([
  [300, 37],
  [5, 3],
  [1, 70],
  [1100, 2],
])('column sum [%i, %i] (a bias gradient) equals tf.sum over rows on cpu', async (N, D) => {
  const x = normals(N * D, 21)
  const names = await kernelsOf(() => columnSum(tf.tensor2d(x, [N, D])))
  expect(names).toContain('LevanterColumnSum')
  expect(names).not.toContain('Sum')
  const got = await columnSum(tf.tensor2d(x, [N, D])).data()
  const want = await onCpu(() => tf.sum(tf.tensor2d(x, [N, D]), 0).dataSync())
  expectClose(got, want, 1e-5 * Math.sqrt(N), 'column sums')
})

describe('WGSL AdamW', () => {
  const cfg: ModelConfigInput = { type: 'gpt2', vocabSize: 300, seqLen: 8, dModel: 12, nLayers: 1, nHeads: 3 }

  test('a moment sharing its buffer with another tensor is copied before the in-place update', async () => {
    const model = createModel(cfg, 4)
    const dev = new DeviceAdamW(AdamWConfig.parse({}), model)
    const name = 'transformer.h.0.mlp.c_fc.weight'
    const held = [tf.clone(dev.m.get(name)!), tf.clone(dev.v.get(name)!)] // share the moments' buffers
    const grads = new Map([...model.params].map(([n, p]) => [n, tf.tensor(normals(p.size, 5), p.shape)]))
    dev.apply(grads, 1e-2).dispose()
    tf.dispose([...grads.values()])
    for (const h of held) expect(Math.max(...Array.from(await h.data(), Math.abs))).toBe(0)
    expect(Math.max(...Array.from(await dev.m.get(name)!.data(), Math.abs))).toBeGreaterThan(0)
    expect(Math.max(...Array.from(await dev.v.get(name)!.data(), Math.abs))).toBeGreaterThan(0)
    tf.dispose(held)
    dev.dispose()
    model.dispose()
  })

  test('params, moments, norms equal host AdamW on cpu over 5 steps (clipped or not); 2 kernels/param', async () => {
    const opt = AdamWConfig.parse({ weightDecay: 0.1, maxGradNorm: 1 })
    const model = createModel(cfg, 4)
    const init = await model.weights()
    const names = [...model.params.keys()]
    const sizes = names.map((n) => model.params.get(n)!.size)
    // steps 1, 3, 5 are clipped (norm > 1), 2 and 4 are not
    const gradsOf = (step: number) => sizes.map((size, i) => normals(size, 100 * step + i, step % 2 ? 0.2 : 0.002))
    const lr = [3e-3, 1e-2, 5e-3, 1e-2, 2e-3]
    const dev = new DeviceAdamW(opt, model)
    const norms: number[] = []
    let kernels: string[] = []
    for (let s = 1; s <= 5; s++) {
      const g = gradsOf(s)
      const grads = new Map(names.map((n, i) => [n, tf.tensor(g[i]!, model.params.get(n)!.shape)]))
      const run = () => [dev.apply(grads, lr[s - 1]!)]
      if (s === 3) {
        kernels = await kernelsOf(run)
      } else {
        const norm = dev.apply(grads, lr[s - 1]!)
        norms.push((await norm.data())[0]!)
        norm.dispose()
      }
      tf.dispose([...grads.values()])
    }
    // one norm kernel over all gradients, one update kernel per parameter, nothing else
    expect(kernels.filter((k) => k === 'LevanterAdamW')).toHaveLength(names.length)
    expect(kernels.filter((k) => k === 'LevanterGlobalNorm')).toHaveLength(1)
    expect(kernels.length).toBe(names.length + 1)
    const got = await model.weights()
    const moments = await dev.state()
    dev.dispose()
    model.dispose()

    const want = await onCpu(() => {
      const m = createModel(cfg, 4)
      for (const [n, d] of init) m.set(n, d)
      const host = new AdamW(opt, m)
      const hostNorms: number[] = []
      for (let s = 1; s <= 5; s++) {
        const g = gradsOf(s)
        const grads = new Map(names.map((n, i) => [n, tf.tensor(g[i]!, m.params.get(n)!.shape)]))
        const norm = host.apply(grads, lr[s - 1]!)
        if (s !== 3) hostNorms.push(norm)
        tf.dispose([...grads.values()])
      }
      const weights = new Map([...m.params].map(([n, p]) => [n, p.dataSync() as Float32Array]))
      m.dispose()
      return { weights, m: host.m, v: host.v, norms: hostNorms }
    })
    norms.forEach((n, i) => expect(Math.abs(n - want.norms[i]!) / want.norms[i]!).toBeLessThan(1e-6))
    const rel = (a: Float32Array, b: Float32Array) => {
      let d = 0,
        s = 0
      for (let i = 0; i < b.length; i++) {
        d = Math.max(d, Math.abs(a[i]! - b[i]!))
        s = Math.max(s, Math.abs(b[i]!))
      }
      return d / s
    }
    for (const n of names) {
      expect(rel(got.get(n)!, want.weights.get(n)!), `param ${n}`).toBeLessThanOrEqual(1e-6)
      expect(rel(moments.get(`m.${n}`)!, want.m.get(n)!), `m ${n}`).toBeLessThanOrEqual(1e-6)
      expect(rel(moments.get(`v.${n}`)!, want.v.get(n)!), `v ${n}`).toBeLessThanOrEqual(1e-6)
    }
  })
})

test('products with a transposed operand run as one flagged matMul on webgpu (no Transpose kernel)', async () => {
  const a = tf.tensor3d(normals(2 * 5 * 3, 7), [2, 5, 3]),
    b = tf.tensor3d(normals(2 * 4 * 3, 8), [2, 4, 3])
  const names = await kernelsOf(() => matMulT(a, b, false, true))
  expect(names).not.toContain('Transpose')
  const got = await matMulT(a, b, false, true).data()
  const want = await onCpu(() =>
    tf.matMul(tf.tensor3d(normals(30, 7), [2, 5, 3]), tf.tensor3d(normals(24, 8), [2, 4, 3]), false, true).dataSync(),
  )
  expectClose(got, want, 1e-5, 'a·bᵀ')
  tf.dispose([a, b])
})
