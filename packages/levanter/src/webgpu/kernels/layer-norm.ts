/**
 * @module LayerNorm as one WGSL dispatch each way on webgpu, one workgroup per row with workgroup
 * reductions: forward y = x̂·g + b with x̂ = (x − mean)·rstd, rstd = 1/√(mean((x − mean)²) + eps)
 * (x̂ and rstd kept for the backward pass); backward dx = rstd·(dx̂ − mean(dx̂) − x̂·mean(dx̂·x̂))
 * with dx̂ = dy·g, the closed form of kernels/layer-norm.ts. The gain and bias gradients stay
 * column sums (kernels/column-sum.ts). tfjs ops take about nine kernels forward (two of them row
 * means) and eight backward for the same.
 */
import * as tf from '@tensorflow/tfjs'
import type { KernelConfig, TensorInfo } from '@tensorflow/tfjs'
import { deviceColumnSum } from './column-sum.js'
import { type WgslKernel, float32Only, grid, newTensor, rowKernel, rowMain, workgroupReduce } from './dispatch.js'
import type { KernelArgs, WebGpuBackendLike } from './dispatch.js'

const forwardCode = (WG: number) => /* wgsl */ `
struct P { eps: f32, rows: u32, D: u32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> g: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<storage, read_write> xhat: array<f32>;
@group(0) @binding(5) var<storage, read_write> rstd: array<f32>;
@group(0) @binding(6) var<uniform> u: P;
${rowMain(
  WG,
  'u.D',
  /* wgsl */ `  let n = f32(u.D);
  var s = 0.0;
  for (var j = lid; j < u.D; j += ${WG}u) { s += x[base + j]; }
  ${workgroupReduce(WG, 's', 'total')}
  let mean = total / n;
  var q = 0.0;
  for (var j = lid; j < u.D; j += ${WG}u) { let c = x[base + j] - mean; q += c * c; }
  ${workgroupReduce(WG, 'q', 'sq')}
  let r = inverseSqrt(sq / n + u.eps);
  for (var j = lid; j < u.D; j += ${WG}u) {
    let h = (x[base + j] - mean) * r;
    xhat[base + j] = h;
    y[base + j] = h * g[j] + b[j];
  }
  if (lid == 0u) { rstd[row] = r; }`,
)}`

const backwardCode = (WG: number) => /* wgsl */ `
struct P { rows: u32, D: u32 }
@group(0) @binding(0) var<storage, read> dy: array<f32>;
@group(0) @binding(1) var<storage, read> xhat: array<f32>;
@group(0) @binding(2) var<storage, read> rstd: array<f32>;
@group(0) @binding(3) var<storage, read> g: array<f32>;
@group(0) @binding(4) var<storage, read_write> dx: array<f32>;
@group(0) @binding(5) var<uniform> u: P;
${rowMain(
  WG,
  'u.D',
  /* wgsl */ `  let n = f32(u.D);
  var s1 = 0.0;
  var s2 = 0.0;
  for (var j = lid; j < u.D; j += ${WG}u) {
    let d = dy[base + j] * g[j];
    s1 += d;
    s2 += d * xhat[base + j];
  }
  ${workgroupReduce(WG, 's1', 't1')}
  ${workgroupReduce(WG, 's2', 't2')}
  let m1 = t1 / n;
  let m2 = t2 / n;
  let r = rstd[row];
  for (var j = lid; j < u.D; j += ${WG}u) {
    dx[base + j] = (dy[base + j] * g[j] - m1 - xhat[base + j] * m2) * r;
  }`,
)}`

function kernel(kind: 'LevanterLayerNorm' | 'LevanterLayerNormGrad', D: number): WgslKernel {
  return rowKernel(kind, D, kind === 'LevanterLayerNorm' ? forwardCode : backwardCode)
}

/** x [N, D], g [D], b [D] → y [N, D], x̂ [N, D], rstd [N, 1]. */
function forward({ inputs, backend, attrs }: KernelArgs): TensorInfo[] {
  const be = backend as WebGpuBackendLike
  const { x, g, b } = inputs as Record<'x' | 'g' | 'b', TensorInfo>
  float32Only('LayerNorm kernels', x, g, b)
  const [N, D] = x.shape as [number, number]
  const y = newTensor(be, [N, D]),
    xhat = newTensor(be, [N, D]),
    rstd = newTensor(be, [N, 1])
  if (N > 0 && D > 0)
    kernel('LevanterLayerNorm', D).dispatch(
      be,
      [x, g, b, y, xhat, rstd],
      [attrs!.eps as number, N, D],
      grid(N, 1),
      new Set([1, 2]),
    )
  return [y, xhat, rstd]
}

/** dy [N, D], x̂ [N, D], rstd [N, 1], g [D] → dx [N, D]. */
function backward({ inputs, backend }: KernelArgs): TensorInfo {
  const be = backend as WebGpuBackendLike
  const { dy, xhat, rstd, g } = inputs as Record<'dy' | 'xhat' | 'rstd' | 'g', TensorInfo>
  float32Only('LayerNorm kernels', dy, xhat, rstd, g)
  const [N, D] = dy.shape as [number, number]
  const dx = newTensor(be, [N, D])
  if (N > 0 && D > 0)
    kernel('LevanterLayerNormGrad', D).dispatch(be, [dy, xhat, rstd, g, dx], [N, D], grid(N, 1), new Set([0, 1]))
  return dx
}

/** The LayerNorm kernels, for the webgpu backend. */
export const LAYER_NORM_KERNELS: KernelConfig[] = [
  { kernelName: 'LevanterLayerNorm', backendName: 'webgpu', kernelFunc: forward as unknown as tf.KernelFunc },
  { kernelName: 'LevanterLayerNormGrad', backendName: 'webgpu', kernelFunc: backward as unknown as tf.KernelFunc },
]

type Save = (s: tf.Tensor[]) => void

/**
 * LayerNorm of x [N, D] with gain g [D] and bias b [D], with its gradients, where the backend has these kernels
 * (webgpu); undefined elsewhere.
 */
// The gain's and bias's gradients: the WGSL column sum, else tf.sum (on webgpu that is what
// kernels/column-sum.ts answers too; this file stays below the CPU kernels that call it).
const columnSumOnDevice = (x: tf.Tensor): tf.Tensor => deviceColumnSum(x) ?? tf.sum(x, 0)

export function deviceLayerNorm(x: tf.Tensor, g: tf.Tensor, b: tf.Tensor, eps: number): tf.Tensor | undefined {
  if (x.rank !== 2 || [x, g, b].some((t) => t.dtype !== 'float32')) return undefined
  if (tf.getKernel('LevanterLayerNorm', tf.getBackend()) === undefined) return undefined
  const f = tf.customGrad((...args: (tf.Tensor | Save)[]) => {
    const [xs, gs, bs] = args as [tf.Tensor, tf.Tensor, tf.Tensor]
    const save = args[3] as Save
    const [y, xhat, rstd] = tf.engine().runKernel('LevanterLayerNorm', { x: xs, g: gs, b: bs }, { eps }) as tf.Tensor[]
    save([xhat!, rstd!, gs])
    return {
      value: y!,
      gradFunc: (dy: tf.Tensor | tf.Tensor[], saved: tf.Tensor[]) => {
        const d = dy as tf.Tensor
        const [xh, rs, gain] = saved as [tf.Tensor, tf.Tensor, tf.Tensor]
        const dx = tf
          .engine()
          .runKernel('LevanterLayerNormGrad', { dy: d, xhat: xh, rstd: rs, g: gain }, {}) as tf.Tensor
        return [dx, columnSumOnDevice(tf.mul(d, xh)), columnSumOnDevice(d)]
      },
    }
  })
  return f(x, g, b) as tf.Tensor
}
