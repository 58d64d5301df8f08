/**
 * Where a GPT-2 decode step goes (bench/decode-roofline.ts --profile), in CPU milliseconds of this process
 * (medians of 8): the whole step on tensor ops and as one native call, and the matrix products alone at the same
 * shapes on the same weights (the 48 block matrices, then the [1, 768]·[768, 50257] head), so what is left of a step
 * is attention, LayerNorm, GELU, the adds and the dispatch between kernels. Printed to stderr.
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
  const mats: [string, number, number][] = []
  for (let i = 0; i < L; i++) {
    const h = `transformer.h.${i}`
    mats.push([`${h}.attn.c_attn.weight`, D, 3 * D], [`${h}.attn.c_proj.weight`, D, D])
    mats.push([`${h}.mlp.c_fc.weight`, D, 4 * D], [`${h}.mlp.c_proj.weight`, 4 * D, D])
  }
  const products = () => {
    const buf = heap.f32().buffer as ArrayBuffer
    const t0 = cpuMs()
    for (const [n, K, N] of mats)
      addon.gemm(
        buf,
        heap.offset(x),
        heap.offset(model.param(n)),
        heap.offset(y),
        1,
        K,
        N,
        false,
        false,
        1,
        0,
        0,
        0,
        false,
      )
    const t1 = cpuMs()
    const wte = heap.offset(model.param('transformer.wte.weight'))
    addon.gemm(buf, heap.offset(x), wte, heap.offset(y), 1, D, V, false, true, 1, 0, 0, 0, false)
    return [t1 - t0, cpuMs() - t1]
  }
  for (let i = 0; i < 2; i++) step(true), step(false), products()
  const rows: number[][] = []
  for (let r = 0; r < 8; r++) rows.push([step(false), step(true), ...products()])
  const [ops, one, blocks, head] = [0, 1, 2, 3].map((k) => median(rows.map((r) => r[k]!)))
  const f = (v: number) => `${v!.toFixed(1)} ms`
  process.stderr.write(
    `decode profile (CPU ms per step at cache length ~${cache.lengths[0]}): tensor ops ${f(ops!)}, one native call ` +
      `${f(one!)}; its products: ${L * 4} block matrices ${f(blocks!)} + head ${f(head!)}; ` +
      `the rest ${f(one! - blocks! - head!)} (tensor ops: ${f(ops! - blocks! - head!)})\n`,
  )
  tf.dispose([x, y])
  cache.dispose()
}
