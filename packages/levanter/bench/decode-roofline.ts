/**
 * Cached greedy decoding of a GPT-2 small (124 M: vocab 50257, 12 × 768, context 1024) at batch 1, in a
 * process of its own: a 16-token prompt and 32 new tokens through `generate`, on LEVANTER_THREADS threads (the
 * bench sets 1). Prints one JSON line: tokens/s (new tokens over the whole call, prefill included; median of
 * `runs` after one warm-up), the weight bytes a token reads, and the memory bandwidth the native addon measures
 * on one thread (a STREAM-style copy, triad and read-only sum; absent where the addon does not run), and the peak
 * RSS of the decoding (before the bandwidth's arrays).
 * `node --import tsx bench/decode-roofline.ts [runs]`
 */
import { initBackend } from '../src/backend.js'
import { generate } from '../src/generate.js'
import { nativeGemm } from '../src/kernels/native-gemm.js'
import { Gpt2LM } from '../src/models/lm.js'

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
const opts = { maxNewTokens: NEW_TOKENS, temperature: 0, useCache: true }
generate(model, prompt, { ...opts, maxNewTokens: 4 })
const rates: number[] = []
for (let r = 0; r < runs; r++) {
  const t = performance.now()
  const g = generate(model, prompt, opts)
  rates.push(g.tokens.length / ((performance.now() - t) / 1000))
}
const median = [...rates].sort((a, b) => a - b)[Math.floor(rates.length / 2)]!
// Every matrix and the token table (the tied head reads all of it) once per token; of the position table, one row.
const weightBytes = 4 * (model.numParams() - (GPT2_SMALL.seqLen - 1) * GPT2_SMALL.dModel)
const peakRssMiB = process.resourceUsage().maxRSS / 1024 // before the bandwidth's arrays
const addon = nativeGemm().addon
const bw = addon?.memoryBandwidth ? addon.memoryBandwidth(256, 5) : undefined
console.log(
  JSON.stringify({
    variant: 'decode-gpt2-small',
    backend: info.name,
    gemm: info.gemm,
    tokensPerSec: median,
    rounds: rates,
    weightBytesPerToken: weightBytes,
    ...(bw ? { copyGBs: bw.copy, triadGBs: bw.triad, readGBs: bw.read } : {}),
    peakRssMiB,
  }),
)
