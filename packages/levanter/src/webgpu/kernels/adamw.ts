/**
 * @module AdamW on webgpu in WGSL: the global gradient norm as one dispatch per gradient (workgroup
 * sums of squares into a shared buffer of partial sums) and one more that adds the partial sums and
 * takes the root; then one dispatch per parameter that clips the gradient by that norm (read on
 * the device) and updates both moments and the parameter, with the arithmetic of the host
 * {@link adamwUpdate} in float32. tfjs ops take ~17 kernels per parameter for the same (square, sum,
 * the norm's adds, and a dozen elementwise ops per update). The moments are updated where they
 * live (the optimizer owns them); the parameter comes back as a new tensor to assign.
 */
import * as tf from '@tensorflow/tfjs'
import type { KernelConfig, TensorInfo } from '@tensorflow/tfjs'
import { WgslKernel, float32Only, grid, newTensor, workgroupReduce } from './dispatch.js'
import type { KernelArgs, WebGpuBackendLike } from './dispatch.js'

/** Threads per workgroup. */
const WG = 64
/** Workgroups (partial sums) per gradient at most. */
const MAX_PARTIALS = 512

const sumSquaresCode = /* wgsl */ `
struct P { n: u32, slot: u32 }
@group(0) @binding(0) var<storage, read> g: array<f32>;
@group(0) @binding(1) var<storage, read_write> partial: array<f32>;
@group(0) @binding(2) var<uniform> u: P;
var<workgroup> red: array<f32, ${WG}>;

@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  var s = 0.0;
  for (var i = wid.x * ${WG}u + lid; i < u.n; i += nwg.x * ${WG}u) { s += g[i] * g[i]; }
  ${workgroupReduce(WG, 's', 'total')}
  if (lid == 0u) { partial[u.slot + wid.x] = total; }
}`

const rootCode = /* wgsl */ `
struct P { count: u32 }
@group(0) @binding(0) var<storage, read> partial: array<f32>;
@group(0) @binding(1) var<storage, read_write> norm: array<f32>;
@group(0) @binding(2) var<uniform> u: P;
var<workgroup> red: array<f32, ${WG}>;

@compute @workgroup_size(${WG})
fn main(@builtin(local_invocation_index) lid: u32) {
  var s = 0.0;
  for (var i = lid; i < u.count; i += ${WG}u) { s += partial[i]; }
  ${workgroupReduce(WG, 's', 'total')}
  if (lid == 0u) { norm[0] = sqrt(total); }
}`

// The host update (optim/adamw.ts adamwUpdate), in float32:
//   g' = g·scale; m ← b1·m + c1·g'; v ← b2·v + c2·g'·g'; p' = p·keep − step·m / (√(v·rbc2) + eps)
// with scale = maxNorm / (norm + 1e-6) where norm > maxNorm (maxNorm 0: no clipping).
const adamwCode = /* wgsl */ `
struct P { b1: f32, c1: f32, b2: f32, c2: f32, keep: f32, step: f32, rbc2: f32, eps: f32, maxNorm: f32, n: u32 }
@group(0) @binding(0) var<storage, read> g: array<f32>;
@group(0) @binding(1) var<storage, read> norm: array<f32>;
@group(0) @binding(2) var<storage, read> p: array<f32>;
@group(0) @binding(3) var<storage, read_write> m: array<f32>;
@group(0) @binding(4) var<storage, read_write> v: array<f32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;
@group(0) @binding(6) var<uniform> u: P;

@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = (wid.y * nwg.x + wid.x) * ${WG}u + lid;
  if (i >= u.n) { return; }
  let total = norm[0];
  var scale = 1.0;
  if (u.maxNorm > 0.0 && total > u.maxNorm) { scale = u.maxNorm / (total + 1e-6); }
  let gi = g[i] * scale;
  let mi = u.b1 * m[i] + u.c1 * gi;
  let vi = u.b2 * v[i] + u.c2 * gi * gi;
  m[i] = mi;
  v[i] = vi;
  out[i] = p[i] * u.keep - (u.step * mi) / (sqrt(vi * u.rbc2) + u.eps);
}`

const sumSquaresKernel = new WgslKernel('LevanterSumSquares', sumSquaresCode)
const rootKernel = new WgslKernel('LevanterNormRoot', rootCode)
const adamwKernel = new WgslKernel('LevanterAdamW', adamwCode)

/** Global L2 norm of the inputs (any names, float32), a scalar. */
function globalNorm({ inputs, backend }: KernelArgs): TensorInfo {
  const b = backend as WebGpuBackendLike
  const gs = Object.values(inputs)
  const sizes = gs.map((g) => g.shape.reduce((a, d) => a * d, 1))
  const groups = sizes.map((n) => Math.min(MAX_PARTIALS, Math.ceil(n / WG)))
  const count = groups.reduce((a, c) => a + c, 0)
  const partial = newTensor(b, [Math.max(1, count)])
  let slot = 0
  gs.forEach((g, i) => {
    float32Only("global norm's gradients", g)
    if (sizes[i]! > 0) sumSquaresKernel.dispatch(b, [g, partial], [sizes[i]!, slot], [groups[i]!], ALL_INTS)
    slot += groups[i]!
  })
  const norm = newTensor(b, [])
  rootKernel.dispatch(b, [partial, norm], [count], [1], ALL_INTS)
  b.disposeData(partial.dataId)
  return norm
}

const ALL_INTS = new Set([0, 1])
const ADAMW_INTS = new Set([9])

/**
 * One AdamW update of parameter p from gradient g, clipped by the global norm `norm` (a scalar on the device);
 * moments m and v are updated in place (each must own its buffer); returns the new parameter.
 */
function adamw({ inputs, backend, attrs }: KernelArgs): TensorInfo {
  const b = backend as WebGpuBackendLike
  const { g, norm, p, m, v } = inputs as Record<'g' | 'norm' | 'p' | 'm' | 'v', TensorInfo>
  const n = p.shape.reduce((a, d) => a * d, 1)
  for (const [name, t] of Object.entries({ g, m, v })) {
    if (t.shape.reduce((a, d) => a * d, 1) !== n)
      throw new Error(`levanter AdamW: ${name} has ${t.shape}, the parameter ${p.shape}`)
  }
  float32Only('AdamW kernels', g, norm, p, m, v)
  for (const t of [m, v])
    if (b.tensorMap.get(t.dataId)!.refCount !== 1)
      throw new Error('levanter AdamW: a moment shares its buffer with another tensor')
  const out = newTensor(b, [...p.shape])
  const a = attrs as Record<'beta1' | 'beta2' | 'eps' | 'keep' | 'step' | 'rbc2' | 'maxNorm', number>
  if (n > 0)
    adamwKernel.dispatch(
      b,
      [g, norm, p, m, v, out],
      [a.beta1, 1 - a.beta1, a.beta2, 1 - a.beta2, a.keep, a.step, a.rbc2, a.eps, a.maxNorm, n],
      grid(n, WG),
      ADAMW_INTS,
    )
  // written in place: a copy tfjs kept on the host from an earlier read (a checkpoint) is stale now
  for (const t of [m, v]) (b.tensorMap.get(t.dataId) as { values?: unknown }).values = null
  return out
}

/** The AdamW kernels, for the webgpu backend. */
export const ADAMW_KERNELS: KernelConfig[] = [
  { kernelName: 'LevanterGlobalNorm', backendName: 'webgpu', kernelFunc: globalNorm as unknown as tf.KernelFunc },
  { kernelName: 'LevanterAdamW', backendName: 'webgpu', kernelFunc: adamw as unknown as tf.KernelFunc },
]

/** Whether the current backend has the fused AdamW kernels. */
export function hasFusedAdamW(): boolean {
  const name = tf.getBackend()
  return tf.getKernel('LevanterAdamW', name) !== undefined && tf.getKernel('LevanterGlobalNorm', name) !== undefined
}

/** Global L2 norm of `grads` on the device, a scalar (the caller disposes it). Needs {@link hasFusedAdamW}. */
export function fusedGlobalNorm(grads: readonly tf.Tensor[]): tf.Scalar {
  const inputs: Record<string, tf.Tensor> = {}
  grads.forEach((g, i) => (inputs[`g${i}`] = g))
  return tf.engine().runKernel('LevanterGlobalNorm', inputs, {}) as tf.Scalar
}

/** Hyperparameters of one update: the host AdamW's (optim/adamw.ts). `maxNorm` 0 turns clipping off. */
export type FusedAdamWStep = {
  readonly beta1: number
  readonly beta2: number
  readonly eps: number
  /** 1 − lr·weightDecay (1 without decay) */
  readonly keep: number
  /** lr / (1 − beta1^t) */
  readonly step: number
  /** 1 / (1 − beta2^t) */
  readonly rbc2: number
  readonly maxNorm: number
}

/** Give `v` a buffer of its own when another tensor shares it (a clone held elsewhere), so an in-place write stays its
 * own. */
function exclusive(v: tf.Variable): void {
  const backend = tf.backend() as unknown as WebGpuBackendLike
  if (backend.tensorMap.get(v.dataId)!.refCount === 1) return
  const copy = tf.mul(v, 1) // a new buffer
  v.assign(copy)
  copy.dispose()
}

/**
 * One fused update: m and v in place (first copied where another tensor shares their buffer); the new parameter
 * returned (the caller assigns it).
 */
export function fusedAdamW(
  g: tf.Tensor,
  norm: tf.Scalar,
  p: tf.Tensor,
  m: tf.Variable,
  v: tf.Variable,
  s: FusedAdamWStep,
): tf.Tensor {
  exclusive(m)
  exclusive(v)
  return tf.engine().runKernel('LevanterAdamW', { g, norm, p, m, v }, { ...s }) as tf.Tensor
}
