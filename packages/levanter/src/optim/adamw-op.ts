/**
 * @module The AdamW update as one op. Every optimizer in levanter steps through it: {@link AdamW}
 * in one process, the mesh members on their owned slices (parallel/mesh-replica.ts), and
 * {@link DeviceAdamW} on a device. The op's constants come from {@link adamwStep}; per element, with
 * the gradient scaled by the clip factor `s` ({@link clipScale}):
 *
 *     g' = s·g;  m ← b1·m + c1·g';  v ← b2·v + c2·g'²;  p ← p·keep − step·m / (√(v·rbc2) + eps)
 *
 * (p ← p − lr·(m̂ / (√v̂ + ε) + wd·p) with m̂ = m / bc1 and v̂ = v / bc2). Its kernels are
 * implementations of it: the JS one over host arrays (kernels/adamw-update.ts), the native one
 * (native/, the same bits), the WGSL one (webgpu/kernels/adamw.ts) and tensor ops elsewhere on a
 * device (both float32).
 */
import { adamwUpdate, sumSquares } from '../kernels/adamw-update.js'
import { nativeKernels } from '../kernels/native-ops.js'
import type { AdamWConfig } from './adamw-config.js'

/** The constants of one AdamW update. */
export type AdamWStep = {
  readonly b1: number
  readonly c1: number
  readonly b2: number
  readonly c2: number
  readonly eps: number
  /** lr / (1 − b1^count) */
  readonly step: number
  /** 1 / (1 − b2^count) */
  readonly rbc2: number
  /** The parameter's factor: 1 − lr·weightDecay where it takes weight decay, else 1. */
  keep(decay: boolean): number
}

/** The constants of the `count`-th update (counting from 1) at learning rate `lr`. */
export function adamwStep(c: AdamWConfig, count: number, lr: number): AdamWStep {
  const decayed = 1 - lr * c.weightDecay
  return {
    b1: c.beta1,
    c1: 1 - c.beta1,
    b2: c.beta2,
    c2: 1 - c.beta2,
    eps: c.eps,
    step: lr / (1 - c.beta1 ** count),
    rbc2: 1 / (1 - c.beta2 ** count),
    keep: (decay) => (decay ? decayed : 1),
  }
}

/** The factor the gradient is scaled by for global norm `norm` (1 unless clipping applies). */
export function clipScale(c: AdamWConfig, norm: number): number {
  return c.maxGradNorm !== null && norm > c.maxGradNorm ? c.maxGradNorm / (norm + 1e-6) : 1
}

/** Σ g² of a host array (native where levanter's native kernels run: the same bits). */
export function squaredNorm(g: Float32Array): number {
  const native = nativeKernels()
  return native ? native.sumSquares(g) : sumSquares(g)
}

/**
 * The update on host arrays: `m` and `v` in place, the new parameter into `out` (which may be `p`).
 * Native where levanter's native kernels run, else the JS kernel: the same bits.
 */
export function updateOnHost(
  s: AdamWStep,
  scale: number,
  decay: boolean,
  g: Float32Array,
  m: Float32Array,
  v: Float32Array,
  p: Float32Array,
  out: Float32Array,
): void {
  const native = nativeKernels()
  const keep = s.keep(decay)
  if (native) native.adamw(g, m, v, p, out, scale, s.b1, s.c1, s.b2, s.c2, keep, s.step, s.rbc2, s.eps)
  else adamwUpdate(g, m, v, p, out, scale, s.b1, s.c1, s.b2, s.c2, keep, s.step, s.rbc2, s.eps)
}
