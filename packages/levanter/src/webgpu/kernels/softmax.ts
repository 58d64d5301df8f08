/**
 * @module Attention's scaled, masked softmax as one WGSL dispatch each way on webgpu, one workgroup
 * per row with workgroup reductions for the row's max and sum: softmax(scale·x) under the causal
 * mask (query t at absolute position offset+t sees keys 0…offset+t; probability 0 beyond), or
 * softmax(scale·x + bias) with an additive mask bias [B, 1, T, S] shared by the H heads of x
 * [B·H, T, S]; backward dx = scale·y·(dy − Σ dy·y). tfjs composes these from a multiply, a mask add
 * and its Softmax forward, and about six kernels backward. A row gets the same bits under both
 * masks (masked keys add exact zeros in the same order), so cached decoding (bias) equals the
 * full forward (causal) as it does on the native kernels (kernels/softmax.ts).
 */
import * as tf from '@tensorflow/tfjs'
import type { KernelConfig, TensorInfo } from '@tensorflow/tfjs'
import { type WgslKernel, float32Only, grid, newTensor, rowKernel, rowMain, workgroupReduce } from './dispatch.js'
import type { KernelArgs, WebGpuBackendLike } from './dispatch.js'

/** The forward shader for `WG` threads per row: causal (`bias` false) or with an additive bias. */
function forwardCode(bias: boolean, WG: number): string {
  return /* wgsl */ `
struct P { scale: f32, rows: u32, T: u32, S: u32, offset: u32, H: u32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
${bias ? '@group(0) @binding(2) var<storage, read> bias: array<f32>;' : ''}
@group(0) @binding(${bias ? 3 : 2}) var<uniform> u: P;
${rowMain(
  WG,
  'u.S',
  /* wgsl */ `  let t = row % u.T;
  ${
    bias
      ? `let width = u.S;
  let bbase = ((row / (u.H * u.T)) * u.T + t) * u.S;`
      : 'let width = min(u.S, u.offset + t + 1u);'
  }
  var mx = -3.402823e38;
  for (var s = lid; s < width; s += ${WG}u) {
    mx = max(mx, u.scale * x[base + s]${bias ? ' + bias[bbase + s]' : ''});
  }
  ${workgroupReduce(WG, 'mx', 'rowMax', (a, b) => `max(${a}, ${b})`)}
  var sum = 0.0;
  for (var s = lid; s < width; s += ${WG}u) {
    sum += exp(u.scale * x[base + s]${bias ? ' + bias[bbase + s]' : ''} - rowMax);
  }
  ${workgroupReduce(WG, 'sum', 'total')}
  for (var s = lid; s < u.S; s += ${WG}u) {
    var p = 0.0;
    if (s < width) { p = exp(u.scale * x[base + s]${bias ? ' + bias[bbase + s]' : ''} - rowMax) / total; }
    y[base + s] = p;
  }`,
)}`
}

const backwardCode = (WG: number) => /* wgsl */ `
struct P { scale: f32, rows: u32, S: u32 }
@group(0) @binding(0) var<storage, read> y: array<f32>;
@group(0) @binding(1) var<storage, read> dy: array<f32>;
@group(0) @binding(2) var<storage, read_write> dx: array<f32>;
@group(0) @binding(3) var<uniform> u: P;
${rowMain(
  WG,
  'u.S',
  /* wgsl */ `  var dot = 0.0;
  for (var s = lid; s < u.S; s += ${WG}u) { dot += dy[base + s] * y[base + s]; }
  ${workgroupReduce(WG, 'dot', 'd')}
  for (var s = lid; s < u.S; s += ${WG}u) { dx[base + s] = u.scale * y[base + s] * (dy[base + s] - d); }`,
)}`

/** The kernel of `kind` for rows of width S (one pipeline per kind and workgroup size). */
function kernel(kind: 'LevanterCausalSoftmax' | 'LevanterBiasSoftmax' | 'LevanterSoftmaxGrad', S: number): WgslKernel {
  return rowKernel(kind, S, (wg) =>
    kind === 'LevanterSoftmaxGrad' ? backwardCode(wg) : forwardCode(kind === 'LevanterBiasSoftmax', wg),
  )
}

// uniforms: scale (float), then integers
const INTS = new Set([1, 2, 3, 4, 5])

function causalForward({ inputs, backend, attrs }: KernelArgs): TensorInfo {
  const b = backend as WebGpuBackendLike
  const x = inputs.x!
  float32Only('softmax kernels', x)
  const S = x.shape[x.shape.length - 1]!,
    T = x.shape[x.shape.length - 2]!,
    rows = x.shape.slice(0, -1).reduce((a, d) => a * d, 1)
  const y = newTensor(b, [...x.shape])
  if (rows > 0 && S > 0)
    kernel('LevanterCausalSoftmax', S).dispatch(
      b,
      [x, y],
      [attrs!.scale as number, rows, T, S, attrs!.offset as number, 1],
      grid(rows, 1),
      INTS,
    )
  return y
}

function biasForward({ inputs, backend, attrs }: KernelArgs): TensorInfo {
  const b = backend as WebGpuBackendLike
  const { x, bias } = inputs as { x: TensorInfo; bias: TensorInfo }
  float32Only('softmax kernels', x, bias)
  const [R, T, S] = x.shape as [number, number, number]
  const H = R / bias.shape[0]!
  const y = newTensor(b, [...x.shape])
  if (R * T > 0 && S > 0)
    kernel('LevanterBiasSoftmax', S).dispatch(
      b,
      [x, y, bias],
      [attrs!.scale as number, R * T, T, S, 0, H],
      grid(R * T, 1),
      INTS,
    )
  return y
}

function backward({ inputs, backend, attrs }: KernelArgs): TensorInfo {
  const b = backend as WebGpuBackendLike
  const { y, dy } = inputs as { y: TensorInfo; dy: TensorInfo }
  float32Only('softmax kernels', y, dy)
  const S = y.shape[y.shape.length - 1]!,
    rows = y.shape.slice(0, -1).reduce((a, d) => a * d, 1)
  const dx = newTensor(b, [...y.shape])
  if (rows > 0 && S > 0)
    kernel('LevanterSoftmaxGrad', S).dispatch(b, [y, dy, dx], [attrs!.scale as number, rows, S], grid(rows, 1), INTS)
  return dx
}

/** The softmax kernels, for the webgpu backend. */
export const SOFTMAX_KERNELS: KernelConfig[] = [
  { kernelName: 'LevanterCausalSoftmax', backendName: 'webgpu', kernelFunc: causalForward as unknown as tf.KernelFunc },
  { kernelName: 'LevanterBiasSoftmax', backendName: 'webgpu', kernelFunc: biasForward as unknown as tf.KernelFunc },
  { kernelName: 'LevanterSoftmaxGrad', backendName: 'webgpu', kernelFunc: backward as unknown as tf.KernelFunc },
]

type Save = (s: tf.Tensor[]) => void

const has = (name: string) => tf.getKernel(name, tf.getBackend()) !== undefined

function withGrad(x: tf.Tensor, scale: number, forward: (x: tf.Tensor) => tf.Tensor): tf.Tensor {
  const f = tf.customGrad((...args: (tf.Tensor | Save)[]) => {
    const [raw, save] = args as [tf.Tensor, Save]
    const y = forward(raw)
    save([y])
    return {
      value: y,
      gradFunc: (dy: tf.Tensor | tf.Tensor[], saved: tf.Tensor[]) => [
        tf.engine().runKernel('LevanterSoftmaxGrad', { y: saved[0]!, dy: dy as tf.Tensor }, { scale }) as tf.Tensor,
      ],
    }
  })
  return f(x) as tf.Tensor
}

/**
 * softmax(scale·x) over rows of x [..., T, S] under the causal mask at `offset`, with its gradient, where the backend
 * has these kernels (webgpu); undefined elsewhere.
 */
export function deviceCausalSoftmax(x: tf.Tensor, scale: number, offset: number): tf.Tensor | undefined {
  if (x.dtype !== 'float32' || x.rank < 2 || !has('LevanterCausalSoftmax')) return undefined
  return withGrad(
    x,
    scale,
    (raw) => tf.engine().runKernel('LevanterCausalSoftmax', { x: raw }, { scale, offset }) as tf.Tensor,
  )
}

/**
 * softmax(scale·x + bias) for x [B·H, T, S] and bias [B, 1, T, S], with its gradient, where the backend has these
 * kernels (webgpu); undefined elsewhere.
 */
export function deviceBiasSoftmax(x: tf.Tensor, scale: number, bias: tf.Tensor): tf.Tensor | undefined {
  if (x.dtype !== 'float32' || bias.dtype !== 'float32' || x.rank !== 3 || bias.rank !== 4) return undefined
  const [R, T, S] = x.shape as [number, number, number]
  const [B, one, bt, bs] = bias.shape as [number, number, number, number]
  if (one !== 1 || bt !== T || bs !== S || R % B !== 0 || !has('LevanterBiasSoftmax')) return undefined
  return withGrad(
    x,
    scale,
    (raw) => tf.engine().runKernel('LevanterBiasSoftmax', { x: raw, bias }, { scale }) as tf.Tensor,
  )
}
