/**
 * The native GEMM alone at GPT-2 small's products (1024 rows: batch 4 × context 256): the MLP's and attention's
 * forward products, their input and weight gradients (the transposed operands the backward pass reads in place), and
 * the vocabulary head [1024, 768]·[768, 50257]ᵀ with its two gradients. GFLOP/s by this process's CPU time (what a
 * shared machine inflates least) and by wall time, median of `rounds` timed products after one warm-up each, on
 * `LEVANTER_THREADS` threads (default every core). Compare builds by running it in turns, interleaved:
 * `node --import tsx bench/gemm-gpt2.ts [rounds] [shape ...]` (shapes by name, default all; one JSON line).
 */
import { median } from '@marin/rigging/bench'
import { nativeGemm } from '../src/kernels/native-gemm.js'

// [M, K, N, tA, tB]: C = op(A)·op(B) as the training step calls it
const SHAPES: Record<string, [number, number, number, boolean, boolean]> = {
  qkv: [1024, 768, 2304, false, false],
  fc: [1024, 768, 3072, false, false],
  proj: [1024, 3072, 768, false, false],
  'fc.dX': [1024, 3072, 768, false, true],
  'fc.dW': [768, 1024, 3072, true, false],
  head: [1024, 768, 50257, false, true],
  'head.dX': [1024, 50257, 768, false, false],
  'head.dW': [50257, 1024, 768, true, false],
}

const rounds = Number(process.argv[2] ?? 3)
if (!Number.isInteger(rounds) || rounds < 1) throw new Error(`gemm-gpt2: rounds must be ≥ 1, got ${process.argv[2]}`)
const names = process.argv.length > 3 ? process.argv.slice(3) : Object.keys(SHAPES)
const { addon, reason } = nativeGemm()
if (!addon) throw new Error(`gemm-gpt2: the native GEMM does not run here: ${reason}`)
const out: Record<string, { cpuGflops: number; wallGflops: number }> = {}
for (const name of names) {
  const shape = SHAPES[name]
  if (!shape) throw new Error(`gemm-gpt2: no shape ${name}; the shapes are ${Object.keys(SHAPES).join(', ')}`)
  const [M, K, N, tA, tB] = shape
  const buffer = new ArrayBuffer((M * K + K * N + M * N) * 4)
  const a = new Float32Array(buffer, 0, M * K),
    b = new Float32Array(buffer, M * K * 4, K * N)
  for (let i = 0; i < a.length; i++) a[i] = Math.sin(i) * 0.5
  for (let i = 0; i < b.length; i++) b[i] = Math.cos(i) * 0.05
  const cpu: number[] = [],
    wall: number[] = []
  for (let r = 0; r <= rounds; r++) {
    const c0 = process.cpuUsage(),
      t0 = performance.now()
    addon.gemm(buffer, 0, M * K * 4, (M * K + K * N) * 4, M, K, N, tA, tB, 1, 0, 0, 0, false)
    const c = process.cpuUsage(c0)
    if (r === 0) continue
    wall.push((performance.now() - t0) / 1000)
    cpu.push((c.user + c.system) / 1e6)
  }
  const gflop = (2 * M * K * N) / 1e9
  out[name] = { cpuGflops: gflop / median(cpu), wallGflops: gflop / median(wall) }
}
console.log(JSON.stringify(out))
