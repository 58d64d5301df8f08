/**
 * @module Sums over the rows of x [N, D] (bias and gain gradients) in WGSL on webgpu, without
 * workgroup barriers: each thread adds one column over a block of up to 256 rows (neighbouring
 * threads read neighbouring columns), writing the result when there is one block, else a partial
 * sum per block that a second dispatch adds up per column. tfjs-webgpu reduces a leading axis as a
 * transpose and a reduction with one workgroup per column (a barrier at every halving; on
 * SwiftShader the largest share of a small model's step).
 */
import * as tf from '@tensorflow/tfjs'
import type { KernelConfig, TensorInfo } from '@tensorflow/tfjs'
import { MAX_WORKGROUPS, WgslKernel, float32Only, newTensor } from './dispatch.js'
import type { KernelArgs, WebGpuBackendLike } from './dispatch.js'

const WG = 64
/** Rows a thread adds. */
const BLOCK = 256

const code = /* wgsl */ `
struct P { N: u32, D: u32, block: u32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> u: P;

@compute @workgroup_size(${WG})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let col = gid.x;
  if (col >= u.D) { return; }
  let first = gid.y * u.block;
  let last = min(u.N, first + u.block);
  var s = 0.0;
  for (var r = first; r < last; r++) { s += x[r * u.D + col]; }
  out[gid.y * u.D + col] = s;
}`

const kernel = new WgslKernel('LevanterColumnSum', code)
const INTS = new Set([0, 1, 2])

/** Σ over rows of x [N, D] into out ([D], or [blocks, D] of partial sums). */
function sumBlocks(b: WebGpuBackendLike, x: TensorInfo, N: number, D: number, block: number): TensorInfo {
  const blocks = Math.ceil(N / block)
  const out = newTensor(b, blocks === 1 ? [D] : [blocks, D])
  kernel.dispatch(b, [x, out], [N, D, block], [Math.ceil(D / WG), blocks], INTS)
  return out
}

function columnSumKernel({ inputs, backend }: KernelArgs): TensorInfo {
  const b = backend as WebGpuBackendLike
  const x = inputs.x!
  float32Only('column sums', x)
  const [N, D] = x.shape as [number, number]
  if (N === 0 || D === 0) return newTensor(b, [D])
  let rows = N,
    t = x
  // one pass for up to BLOCK rows; otherwise partial sums per block, added up the same way
  while (rows > BLOCK) {
    const partial = sumBlocks(b, t, rows, D, BLOCK)
    if (t !== x) b.disposeData(t.dataId)
    t = partial
    rows = Math.ceil(rows / BLOCK)
  }
  const out = sumBlocks(b, t, rows, D, rows)
  if (t !== x) b.disposeData(t.dataId)
  return out
}

/** The column-sum kernel, for the webgpu backend. */
export const COLUMN_SUM_KERNELS: KernelConfig[] = [
  { kernelName: 'LevanterColumnSum', backendName: 'webgpu', kernelFunc: columnSumKernel as unknown as tf.KernelFunc },
]

/** Σ over the rows of x [N, D], [D], where the backend has this kernel (webgpu); undefined elsewhere. */
export function deviceColumnSum(x: tf.Tensor): tf.Tensor | undefined {
  if (x.rank !== 2 || x.dtype !== 'float32' || tf.getKernel('LevanterColumnSum', tf.getBackend()) === undefined)
    return undefined
  if (Math.ceil(x.shape[1]! / WG) > MAX_WORKGROUPS) return undefined
  return tf.engine().runKernel('LevanterColumnSum', { x }, {}) as tf.Tensor
}
