/**
 * Where a batched GPT-2 small decode step goes, 1 row against 16 (what `marin serve` runs per token), in CPU ms of
 * this process (medians of `rounds`, default 7): the whole step as one native call with its logits read, the same
 * without the read, the cache's own bookkeeping, the step's products alone at the same shapes (the 48 block
 * matrices, the tied head) on the batch kernel (or the small-M path at one row), one layer's attention over the cache
 * (×12), the engine's per-row sampling (log-softmax and a draw over the 50257 logits), and the prefill pass of the
 * serve bench's 16 prompts of ~38 tokens (in the engine's 256-token passes, and as one pass).
 * `node --import tsx bench/decode-batch-profile.ts [rounds]`; prints to stderr.
 */
import * as tf from '@tensorflow/tfjs'
import * as os from 'node:os'
import { initBackend } from '../src/backend.js'
import { decodeStepFastOnDevice } from '../src/generate.js'
import { nativeGemm } from '../src/kernels/native-gemm.js'
import { BatchCache } from '../src/models/batch-cache.js'
import { prefillOnDevice } from '../src/models/decode.js'
import { Gpt2LM } from '../src/models/lm.js'
import { Rng } from '../src/rng.js'
import { logSoftmax, sampleToken } from '../src/sampling.js'

const rounds = Number(process.argv[2] ?? '7')
await initBackend()
const C = { vocabSize: 50257, seqLen: 1024, dModel: 768, nLayers: 12, nHeads: 12 }
const model = new Gpt2LM(C, 0)
const native = nativeGemm().addon
if (!native?.gemmRowsBatch || !native.decodeAttention)
  throw new Error(
    'decode-batch-profile: the native batch kernel and decode attention do not run here ' +
      `(${nativeGemm().reason ?? 'an addon built before them'})`,
  )
const addon = native as typeof native & Required<Pick<typeof native, 'gemmRowsBatch' | 'decodeAttention'>>
const cpuMs = () => {
  const u = process.cpuUsage()
  return (u.user + u.system) / 1000
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
const time = (f: () => void) => {
  const t = cpuMs()
  f()
  return cpuMs() - t
}
const D = C.dModel,
  V = C.vocabSize,
  L = C.nLayers,
  H = C.nHeads,
  K = D / H
const f32 = (name: string) => model.param(name).dataSync() as Float32Array
const mats: [Float32Array, number, number][] = []
for (let l = 0; l < L; l++) {
  const h = `transformer.h.${l}`
  mats.push([f32(`${h}.attn.c_attn.weight`), D, 3 * D], [f32(`${h}.attn.c_proj.weight`), D, D])
  mats.push([f32(`${h}.mlp.c_fc.weight`), D, 4 * D], [f32(`${h}.mlp.c_proj.weight`), 4 * D, D])
}
const wte = f32('transformer.wte.weight')
const prompt = (i: number, n = 40) => Array.from({ length: n }, (_, j) => (i * 31 + j * 7919) % V)

function profile(B: number): Record<string, number> {
  const cache = new BatchCache()
  const p = prefillOnDevice(
    model,
    Array.from({ length: B }, (_, i) => prompt(i)),
    false,
  )
  cache.add(p.kv, new Array<number>(B).fill(40))
  p.logits.dispose()
  const toks = new Array<number>(B).fill(5)
  const a = new Float32Array(B * 4 * D).fill(0.01),
    c = new Float32Array(B * V)
  const S = 48
  const q = new Float32Array(B * 3 * D).fill(0.1),
    pk = new Float32Array(B * H * S * K).fill(0.1),
    ok = new Float32Array(B * H * (S + 1) * K),
    out = new Float32Array(B * D),
    lens = new Int32Array(B).fill(S)
  const rng = new Rng(0)
  const logits = new Float32Array(B * V).map((_, i) => Math.sin(i))
  const lp = new Float64Array(V)
  const parts = {
    stepRead: () => {
      const l = decodeStepFastOnDevice(model, cache, toks)
      l.dataSync()
      l.dispose()
    },
    stepNoRead: () => decodeStepFastOnDevice(model, cache, toks).dispose(),
    blocks: () => {
      for (const [w, k, n] of mats) addon.gemmRowsBatch(a.subarray(0, B * k), w, c.subarray(0, B * n), B, k, n, false)
    },
    head: () => addon.gemmRowsBatch(a.subarray(0, B * D), wte, c, B, D, V, false, false, true),
    attention12: () => {
      for (let l = 0; l < L; l++)
        addon.decodeAttention(
          q,
          q.subarray(D),
          q.subarray(2 * D),
          pk,
          pk,
          lens,
          ok,
          ok,
          out,
          H,
          H,
          K,
          3 * D,
          3 * D,
          1 / Math.sqrt(K),
        )
    },
    sampleRows: () => {
      for (let r = 0; r < B; r++) {
        const row = logits.subarray(r * V, (r + 1) * V)
        const l = logSoftmax(row, lp)
        sampleToken(row, { temperature: 1, topP: 1 }, rng, l)
      }
    },
  }
  const res: Record<string, number[]> = {}
  for (let r = -1; r < rounds; r++)
    for (const [k, f] of Object.entries(parts)) {
      const t = time(f)
      if (r >= 0) (res[k] ??= []).push(t)
    }
  cache.dispose()
  return Object.fromEntries(Object.entries(res).map(([k, v]) => [k, median(v)]))
}

function prefillCost(): Record<string, number> {
  const prompts = Array.from({ length: 16 }, (_, i) => prompt(i, 36 + (i % 5)))
  const passes: number[][][] = []
  let cur: number[][] = [],
    n = 0
  for (const p of prompts) {
    if (cur.length > 0 && n + p.length > 256) passes.push(cur), (cur = []), (n = 0)
    cur.push(p), (n += p.length)
  }
  passes.push(cur)
  const run = (ps: number[][][]) => () => {
    for (const x of ps) {
      const o = prefillOnDevice(model, x, false)
      o.logits.dataSync()
      tf.dispose([o.logits, ...o.kv.flatMap((l) => [l.k, l.v])])
    }
  }
  const one = prefillOnDevice(model, [prompts[0]!], false)
  tf.dispose([one.logits, ...one.kv.flatMap((l) => [l.k, l.v])])
  const a: number[] = [],
    b: number[] = [],
    s: number[] = []
  for (let r = 0; r < 3; r++) {
    a.push(time(run(passes)))
    b.push(time(run([prompts])))
    s.push(time(run([[prompts[0]!]])))
  }
  return { [`engine ${passes.length} passes`]: median(a), 'one pass': median(b), 'one prompt': median(s) }
}

const one = profile(1),
  many = profile(16)
const fmt = (r: Record<string, number>) =>
  Object.entries(r)
    .map(([k, v]) => `${k} ${v.toFixed(1)}`)
    .join(', ')
process.stderr.write(
  `load ${os.loadavg()[0]!.toFixed(1)}\n1 row (CPU ms): ${fmt(one)}\n16 rows (CPU ms): ${fmt(many)}\n`,
)
process.stderr.write(`prefill of 16 prompts of 36-40 tokens (CPU ms): ${fmt(prefillCost())}\n`)
model.dispose()
