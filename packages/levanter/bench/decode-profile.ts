/**
 * Where a GPT-2 decode step goes (bench/decode-roofline.ts --profile), in CPU milliseconds of this process
 * (medians of 8): the whole step on tensor ops and as one native call, and the matrix products alone at the same
 * shapes on the same weights (the 48 block matrices by kind, then the [1, 768]·[768, 50257] head), so what is left of a
 * step is attention, LayerNorm, GELU, the adds and the dispatch between kernels; each kind of product also as GB/s of
 * weights read (over CPU time, per thread), beside the addon's one-thread read-only sum (its roofline). Printed to
 * stderr.
 */
import * as tf from '@tensorflow/tfjs'
import { useNativeDecodeStep } from '../src/kernels/native-gemv-decode.js'
import { nativeGemm } from '../src/kernels/native-gemm.js'
import { WasmHeap } from '../src/kernels/wasm-heap.js'
import type { WasmBackendLike } from '../src/kernels/wasm-heap.js'
import { decodeStepFastOnDevice } from '../src/generate.js'
import { BatchCache } from '../src/models/batch-cache.js'
import { prefillOnDevice } from '../src/models/decode.js'
import type { CausalLM } from '../src/models/lm.js'

const cpuMs = () => {
  const u = process.cpuUsage()
  return (u.user + u.system) / 1000
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

export function profileDecodeStep(model: CausalLM, prompt: readonly number[]): void {
  const addon = nativeGemm().addon
  if (!addon || tf.getBackend() !== 'wasm') {
    process.stderr.write('decode profile: needs the native addon on the wasm backend\n')
    return
  }
  const { dModel: D, nLayers: L, vocabSize: V } = model.config
  const cache = new BatchCache()
  const p = prefillOnDevice(model, [prompt], false)
  cache.add(p.kv, [prompt.length])
  p.logits.dispose()
  const step = (native: boolean) => {
    const was = useNativeDecodeStep(native)
    const t = cpuMs()
    const l = decodeStepFastOnDevice(model, cache, [5])
    l.dataSync()
    l.dispose()
    useNativeDecodeStep(was)
    return cpuMs() - t
  }
  const heap = new WasmHeap(tf.backend() as unknown as WasmBackendLike)
  const x = tf.zeros([4 * D]),
    y = tf.zeros([V])
  // the four kinds of block matrix: [parameter, K, N]
  const kinds: [string, number, number][] = [
    ['attn.c_attn.weight', D, 3 * D],
    ['attn.c_proj.weight', D, D],
    ['mlp.c_fc.weight', D, 4 * D],
    ['mlp.c_proj.weight', 4 * D, D],
  ]
  const gemm = (b: number, K: number, N: number, tB: boolean) =>
    addon.gemm(
      heap.f32().buffer as ArrayBuffer,
      heap.offset(x),
      b,
      heap.offset(y),
      1,
      K,
      N,
      false,
      tB,
      1,
      0,
      0,
      0,
      false,
    )
  // CPU ms of each kind over the L layers, then of the head
  const products = () => {
    const out: number[] = []
    for (const [n, K, N] of kinds) {
      const t = cpuMs()
      for (let i = 0; i < L; i++) gemm(heap.offset(model.param(`transformer.h.${i}.${n}`)), K, N, false)
      out.push(cpuMs() - t)
    }
    const t = cpuMs()
    gemm(heap.offset(model.param('transformer.wte.weight')), D, V, true)
    return [...out, cpuMs() - t]
  }
  for (let i = 0; i < 2; i++) step(true), step(false), products()
  const rows: number[][] = []
  for (let r = 0; r < 8; r++) rows.push([step(false), step(true), ...products()])
  const [ops, one, ...parts] = rows[0]!.map((_, k) => median(rows.map((r) => r[k]!)))
  const blocks = parts.slice(0, 4).reduce((a, b) => a + b, 0),
    head = parts[4]!
  const f = (v: number) => `${v!.toFixed(1)} ms`
  // GB/s of weights read over CPU time: bytes ÷ CPU seconds (per thread where the pool splits a product)
  const gbs = (floats: number, ms: number) => `${((4 * floats) / (ms * 1e6)).toFixed(1)} GB/s`
  const each = kinds.map(
    ([n, K, N], i) => `${n.split('.')[1]} [${K}, ${N}] ${f(parts[i]!)} ${gbs(L * K * N, parts[i]!)}`,
  )
  const read = addon.memoryBandwidth ? (addon.memoryBandwidth(256, 3) as { read: number }).read : undefined
  process.stderr.write(
    `decode profile (CPU ms per step at cache length ~${cache.lengths[0]}): tensor ops ${f(ops!)}, one native call ` +
      `${f(one!)}; its products: ${L * 4} block matrices ${f(blocks)} (${gbs(L * 12 * D * D, blocks)}: ` +
      `${each.join(', ')}) + head ${f(head)} (${gbs(V * D, head)}); the rest ${f(one! - blocks - head)} ` +
      `(tensor ops: ${f(ops! - blocks - head)})` +
      `${read === undefined ? '' : `; one-thread read-only sum ${read.toFixed(1)} GB/s`}\n`,
  )
  tf.dispose([x, y])
  cache.dispose()
}
