/**
 * bf16 against fp32 GEMM GFLOP/s on the native addon at GPT-2 small's shapes (the MLP's [1024, 768]·[768, 3072] and
 * the vocab head's [1024, 768]·[768, 50257]), on `LEVANTER_THREADS` threads (default every core), the two
 * precisions interleaved, median of `rounds` timed products after one warm-up each. `levanter.bench.ts` emits these;
 * run alone: `node --import tsx bench/bf16-gemm.ts`.
 */
import { fileURLToPath } from 'node:url'
import { emit, median } from '@marin/rigging/bench'
import { bf16Unavailable, nativeGemm } from '../src/kernels/native-gemm.js'

const SHAPES = [
  { name: 'mlp', M: 1024, K: 768, N: 3072 },
  { name: 'head', M: 1024, K: 768, N: 50257 },
] as const

/** Emit `gemm_bf16_gflops_gpt2_small_<shape>` lines (baseline: fp32), or say on stderr why they are skipped. */
export function bf16GemmLines(bench: string, rounds = 3): void {
  const why = bf16Unavailable()
  const addon = nativeGemm().addon
  if (why || !addon?.setPrecision) {
    process.stderr.write(`levanter bench: bf16 GEMM lines skipped: ${why ?? 'the addon lacks setPrecision'}\n`)
    return
  }
  for (const { name, M, K, N } of SHAPES) {
    const buffer = new ArrayBuffer((M * K + K * N + M * N) * 4)
    const a = new Float32Array(buffer, 0, M * K),
      b = new Float32Array(buffer, M * K * 4, K * N)
    for (let i = 0; i < a.length; i++) a[i] = Math.sin(i) * 0.5
    for (let i = 0; i < b.length; i++) b[i] = Math.cos(i) * 0.05
    const product = () =>
      addon.gemm(buffer, 0, M * K * 4, (M * K + K * N) * 4, M, K, N, false, false, 1, 0, 0, 0, false)
    const seconds: Record<'fp32' | 'bf16', number[]> = { fp32: [], bf16: [] }
    const before = addon.setPrecision()
    try {
      for (let r = 0; r <= rounds; r++)
        for (const p of ['fp32', 'bf16'] as const) {
          addon.setPrecision(p)
          const t0 = performance.now()
          product()
          if (r > 0) seconds[p].push((performance.now() - t0) / 1000)
        }
    } finally {
      addon.setPrecision(before)
    }
    const gflops = (p: 'fp32' | 'bf16') => (2 * M * K * N) / median(seconds[p]) / 1e9
    emit({
      bench,
      metric: `gemm_bf16_gflops_gpt2_small_${name}_${M}x${K}x${N}`,
      value: gflops('bf16'),
      unit: 'GFLOP/s',
      baseline: gflops('fp32'),
    })
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) bf16GemmLines('levanter')
