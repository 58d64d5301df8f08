/**
 * Cached greedy decoding of a GPT-2 small (124 M: vocab 50257, 12 × 768, context 1024) at batch 1, in a
 * process of its own: a 16-token prompt and 32 new tokens through `generate`, on LEVANTER_THREADS threads (the
 * bench sets 1). Three ways in interleaved rounds (one `generate` of each per round, so a change in the machine's
 * load falls on all three): the one-call native step over the float32 weights (what `generate` runs), the same
 * step over bf16 copies of the weights (`weights: 'bf16'`, where the CPU has AVX512_BF16), and the step on tensor
 * ops (the path before the one-call step, for the ratio). Prints one JSON line: tokens/s of each (new tokens over
 * the whole call, prefill included; median of `runs` after one warm-up), the same over the process's CPU time (the
 * rate a core of our own would give: robust to other processes' time slices, not to their memory traffic), the
 * bytes a token reads in float32 and in bf16, the memory bandwidth the native addon measures on one thread (a
 * STREAM-style copy, triad and read-only sum; absent where the addon does not run), on LEVANTER_THREADS > 1 the
 * same on the pool's threads (`…GBsThreads`: the roofline of a step split over them), the 1-minute load, and the
 * peak RSS of the decoding (before the bandwidth's arrays).
 * `node --import tsx bench/decode-roofline.ts [runs] [--profile]`: --profile also prints where a step goes.
 */
import * as os from 'node:os'
import { initBackend } from '../src/backend.js'
import { generate } from '../src/generate.js'
import type { GenerateOptions } from '../src/generate.js'
import { useNativeDecodeStep } from '../src/kernels/native-gemv-decode.js'
import { bf16Unavailable, nativeGemm, threadCount } from '../src/kernels/native-gemm.js'
import { Gpt2LM } from '../src/models/lm.js'
import { profileDecodeStep } from './decode-profile.js'

export const GPT2_SMALL = { vocabSize: 50257, seqLen: 1024, dModel: 768, nLayers: 12, nHeads: 12 }
export const PROMPT_TOKENS = 16
export const NEW_TOKENS = 32

const runsArg = process.argv[2] ?? '3'
const runs = Number(runsArg)
if (!Number.isInteger(runs) || runs < 1) {
  console.error(`decode-roofline.ts: runs must be a positive integer, got "${runsArg}"`)
  process.exit(2)
}
const info = await initBackend()
const model = new Gpt2LM(GPT2_SMALL, 0)
const prompt = Array.from({ length: PROMPT_TOKENS }, (_, i) => (i * 7919) % GPT2_SMALL.vocabSize)
const opts: GenerateOptions = { maxNewTokens: NEW_TOKENS, temperature: 0, useCache: true }
const bf16Why = bf16Unavailable()
const cpuMs = () => {
  const u = process.cpuUsage()
  return (u.user + u.system) / 1000
}
type Way = { name: string; o: GenerateOptions; tensorOps?: boolean; wall: number[]; cpu: number[] }
const ways: Way[] = [
  { name: 'fp32', o: opts, wall: [], cpu: [] },
  { name: 'tensorOps', o: opts, tensorOps: true, wall: [], cpu: [] },
  ...(bf16Why ? [] : [{ name: 'bf16', o: { ...opts, weights: 'bf16' as const }, wall: [], cpu: [] }]),
]
if (bf16Why) process.stderr.write(`decode-roofline: no bf16 rows: ${bf16Why}\n`)
const once = (w: Way) => {
  const was = useNativeDecodeStep(!w.tensorOps)
  try {
    return generate(model, prompt, w.o)
  } finally {
    useNativeDecodeStep(was)
  }
}
for (const w of ways) once({ ...w, o: { ...w.o, maxNewTokens: 4 } }) // warm-up (bf16: converts the weights)
const tokens: Record<string, number[]> = {}
for (let r = 0; r < runs; r++)
  for (const w of ways) {
    const t = performance.now(),
      c = cpuMs()
    const g = once(w)
    w.wall.push(g.tokens.length / ((performance.now() - t) / 1000))
    w.cpu.push(g.tokens.length / ((cpuMs() - c) / 1000))
    tokens[w.name] = g.tokens
  }
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
const rate = (name: string, k: 'wall' | 'cpu') => {
  const w = ways.find((x) => x.name === name)
  return w ? median(w[k]) : undefined
}
if (process.argv.includes('--profile')) profileDecodeStep(model, prompt)
// Every matrix and the token table (the tied head reads all of it) once per token; of the position table, one row.
const weightBytes = 4 * (model.numParams() - (GPT2_SMALL.seqLen - 1) * GPT2_SMALL.dModel)
// in bf16: the matrices (four a layer) and the token table at 2 bytes, the biases, gains and position row at 4
const D = GPT2_SMALL.dModel,
  matrixFloats = GPT2_SMALL.nLayers * 12 * D * D + GPT2_SMALL.vocabSize * D
const bf16Bytes = weightBytes - 2 * matrixFloats
const peakRssMiB = process.resourceUsage().maxRSS / 1024 // before the bandwidth's arrays
const addon = nativeGemm().addon
// (copyCpu, readCpu: over the thread's CPU time, from addons that measure it)
const bw = addon?.memoryBandwidth
  ? (addon.memoryBandwidth(256, 5) as { copy: number; triad: number; read: number; copyCpu?: number; readCpu?: number })
  : undefined
// on LEVANTER_THREADS > 1, the same on the pool's threads (the step's products split over them): the roofline of
// a step on that many threads
const threads = threadCount()
const bwThreads = addon?.memoryBandwidth && threads > 1 ? addon.memoryBandwidth(256, 5, threads) : undefined
console.log(
  JSON.stringify({
    variant: 'decode-gpt2-small',
    backend: info.name,
    gemm: info.gemm,
    tokensPerSec: rate('fp32', 'wall'),
    rounds: ways[0]!.wall,
    tokensPerCpuSec: rate('fp32', 'cpu'),
    tokensPerSecTensorOps: rate('tensorOps', 'wall'),
    tokensPerCpuSecTensorOps: rate('tensorOps', 'cpu'),
    ...(bf16Why
      ? {}
      : {
          tokensPerSecBf16: rate('bf16', 'wall'),
          tokensPerCpuSecBf16: rate('bf16', 'cpu'),
          bf16GreedyEqual: tokens.bf16!.every((t, i) => t === tokens.fp32![i]) ? 1 : 0,
        }),
    fusedEqualsTensorOps: tokens.tensorOps!.every((t, i) => t === tokens.fp32![i]) ? 1 : 0,
    weightBytesPerToken: weightBytes,
    bf16WeightBytesPerToken: bf16Bytes,
    ...(bw
      ? {
          copyGBs: bw.copy,
          triadGBs: bw.triad,
          readGBs: bw.read,
          ...(bw.copyCpu === undefined ? {} : { copyCpuGBs: bw.copyCpu, readCpuGBs: bw.readCpu }),
        }
      : {}),
    threads,
    ...(bwThreads
      ? {
          copyGBsThreads: bwThreads.copy,
          readGBsThreads: bwThreads.read,
          copyCpuGBsThreads: bwThreads.copyCpu,
          readCpuGBsThreads: bwThreads.readCpu,
        }
      : {}),
    load: os.loadavg()[0],
    peakRssMiB,
  }),
)
