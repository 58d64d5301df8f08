/**
 * @module `pnpm bench serve`: generated tokens/s of the OpenAI-compatible server for 1 stream and
 * for 16 concurrent streams (their ratio is the continuous-batching gain), and time to first token
 * p50/p99 under the 16-stream load, all over HTTP with streaming completions on loopback.
 * Model: GPT-2, vocab 512, context 128, 4 layers, d_model 256, 4 heads, random init (speed does
 * not depend on the weights); prompts of 60–75 characters (36–40 tokens), 32 new tokens each;
 * after a warm-up of each way, medians of 5 rounds. Also the forward pass alone: tokens/s of one
 * decode step over 1 and 16 rows of a 40-position cache, with attention as levanter's one native
 * kernel and on tensor ops (the kernel's gain).
 *
 * Then a long prompt arriving under load, with chunked prefill (the default `maxPrefillTokens`) and
 * unchunked (a budget that holds the whole prompt), the same model with a 1,536-token context: a
 * stream decodes 40 tokens; after its third, a 1,200-token prompt arrives, and 4 short requests
 * 40, 80, 120, 160 ms later. Reported: the decoding stream's inter-token latency p99, the short
 * requests' time to first token p99 (from when each was due: the client shares the server's
 * process, whose event loop a prefill pass holds), and the long prompt's own time to first token;
 * medians of 5 rounds, ratio = unchunked ÷ chunked.
 *
 * Last, the 16-vs-1 rows at GPT-2 small's size (a randomly initialised GPT-2-small-shaped model: vocab 50257,
 * context 1024, 12 × 768, made here, no download; the same prompts and 32 new tokens): generated tokens/s of 16
 * streams against one, and time to first token p50 and p95 of each way, in interleaved rounds
 * (SERVE_BENCH_GPT2_ROUNDS @default 3, 0 skips them), each way also per second of the process's CPU time (robust to
 * other processes' time slices on a shared machine). The random weights do shape one cost: their logits are nearly
 * flat (a range of ~±2.4), so each row's draw at temperature 1 walks about half the 50257 ids (a trained model's
 * draw ends within a few); levanter's bench/decode-batch-profile.ts shows where a 1- and a 16-row step go.
 */
import { trainBpe } from '@marin/datakit'
import * as os from 'node:os'
import { BatchCache, Gpt2LM, decodeStep, initBackend, prefill, useDecodeKernel } from '@marin/levanter'
import { emit, median } from '@marin/rigging/bench'
import { startServer } from '../src/serve/server.js'

const NEW_TOKENS = 32,
  STREAMS = 16,
  ROUNDS = 5
const TEXT = [
  'the quick brown fox jumps over the lazy dog while the cat sleeps on the warm mat',
  'language models predict the next token of a text from the tokens that came before it',
  'a server that batches requests shares each forward pass between all running sequences',
  'time to first token is what a user waits for before the answer starts to appear',
]

const backend = await initBackend()
process.stderr.write(`backend ${backend.name}\n`)
const tokenizer = trainBpe(TEXT, { vocabSize: 512 })
const model = new Gpt2LM({ vocabSize: 512, seqLen: 128, dModel: 256, nLayers: 4, nHeads: 4 }, 0)
const server = await startServer({ model, tokenizer, name: 'bench', port: 0, maxBatch: STREAMS, accessLog: () => {} })

type Streamed = { tokens: number; ttftMs: number; times: number[] }

/**
 * One streaming completion against `url`: tokens generated, ms from `t0` (default: now) to the first one, and when
 * each token came (performance.now()). `onToken` sees each token's arrival.
 */
async function completion(
  url: string,
  body: { prompt: string | number[]; max_tokens: number; seed: number },
  t0 = performance.now(),
  onToken?: (n: number) => void,
): Promise<Streamed> {
  const res = await fetch(`${url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    // logprobs: 0 makes every token its own event, so the first event is the first token.
    body: JSON.stringify({
      model: 'bench',
      ...body,
      stream: true,
      logprobs: 0,
      stream_options: { include_usage: true },
    }),
  })
  if (!res.ok) throw new Error(`completion: HTTP ${res.status}: ${await res.text()}`)
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader()
  const times: number[] = []
  let tokens = 0,
    buf = ''
  for (;;) {
    const { value, done } = await reader.read()
    if (done) break
    buf += value
    let at: number
    while ((at = buf.indexOf('\n\n')) >= 0) {
      const line = buf.slice(0, at).replace(/^data: /, '')
      buf = buf.slice(at + 2)
      if (line === '[DONE]') continue
      const ev = JSON.parse(line) as {
        choices: { logprobs: { tokens: string[] } | null }[]
        usage?: { completion_tokens: number }
      }
      const now = performance.now()
      for (const _ of ev.choices[0]?.logprobs?.tokens ?? []) {
        times.push(now)
        onToken?.(times.length)
      }
      if (ev.usage) tokens = ev.usage.completion_tokens
    }
  }
  if (tokens !== body.max_tokens) throw new Error(`completion: ${tokens} tokens, expected ${body.max_tokens}`)
  return { tokens, ttftMs: times[0]! - t0, times }
}

/** One streaming completion of the 16-vs-1 runs. */
const stream = (i: number) =>
  completion(server.url, { prompt: TEXT[i % TEXT.length]!.slice(0, 60 + i), max_tokens: NEW_TOKENS, seed: i })

// Warm-up, both ways (JIT, the wasm heap, the kernels' shapes): until each has run, the first rounds are the slowest.
await stream(0)
await Promise.all(Array.from({ length: STREAMS }, (_, i) => stream(i)))
const single: number[] = [],
  singleTtft: number[] = [],
  batched: number[] = [],
  ttfts: number[] = []
for (let r = 0; r < ROUNDS; r++) {
  let t0 = performance.now(),
    n = 0
  for (let i = 0; i < 3; i++) {
    const s = await stream(i)
    n += s.tokens
    singleTtft.push(s.ttftMs)
  }
  single.push(n / ((performance.now() - t0) / 1000))
  t0 = performance.now()
  const all = await Promise.all(Array.from({ length: STREAMS }, (_, i) => stream(i)))
  batched.push(all.reduce((a, s) => a + s.tokens, 0) / ((performance.now() - t0) / 1000))
  ttfts.push(...all.map((s) => s.ttftMs))
  process.stderr.write(
    `round ${r}: 1 stream ${single.at(-1)!.toFixed(1)} tok/s, ` +
      `${STREAMS} streams ${batched.at(-1)!.toFixed(1)} tok/s\n`,
  )
}
const q = (xs: readonly number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))]!
const one = median(single)
emit({ bench: 'serve', metric: 'tokens_per_s_1_stream', value: one, unit: 'tokens/s' })
emit({
  bench: 'serve',
  metric: `tokens_per_s_${STREAMS}_streams`,
  value: median(batched),
  unit: 'tokens/s',
  baseline: one,
})
emit({
  bench: 'serve',
  metric: `ttft_p50_${STREAMS}_streams`,
  value: q(ttfts, 0.5),
  unit: 'ms',
  baseline: median(singleTtft),
  lowerIsBetter: true,
})
emit({
  bench: 'serve',
  metric: `ttft_p99_${STREAMS}_streams`,
  value: q(ttfts, 0.99),
  unit: 'ms',
  baseline: median(singleTtft),
  lowerIsBetter: true,
})
await server.close()

/** Tokens/s of decode steps over `rows` sequences (median of 5 steps of 10). */
async function stepRate(rows: number): Promise<number> {
  const cache = new BatchCache()
  const pf = await prefill(
    model,
    Array.from({ length: rows }, (_, i) => Array.from({ length: 40 }, (_, j) => (i + j) % 256)),
    false,
  )
  cache.add(pf.kv, new Array<number>(rows).fill(40))
  const toks = new Array<number>(rows).fill(5)
  const rates: number[] = []
  for (let r = 0; r < 6; r++) {
    const t0 = performance.now()
    for (let i = 0; i < 10; i++) await decodeStep(model, cache, toks)
    if (r > 0) rates.push((rows * 10) / ((performance.now() - t0) / 1000))
  }
  cache.dispose()
  return median(rates)
}
const step1 = await stepRate(1),
  stepN = await stepRate(STREAMS)
emit({ bench: 'serve', metric: 'decode_step_tokens_per_s_1_row', value: step1, unit: 'tokens/s' })
emit({
  bench: 'serve',
  metric: `decode_step_tokens_per_s_${STREAMS}_rows`,
  value: stepN,
  unit: 'tokens/s',
  baseline: step1,
})
// The same steps with attention on tensor ops (split, head transposes, concats onto the cache, batched products)
// instead of the one native kernel; equal where the native kernels do not run.
useDecodeKernel(false)
const [plain1, plainN] = [await stepRate(1), await stepRate(STREAMS)]
useDecodeKernel(true)
for (const [rows, fused, plain] of [
  [1, step1, plain1],
  [STREAMS, stepN, plainN],
] as const)
  emit({
    bench: 'serve',
    metric: `decode_step_tokens_per_s_${rows}_row${rows === 1 ? '' : 's'}_attention_kernel`,
    value: fused,
    unit: 'tokens/s',
    baseline: plain,
  })
model.dispose()

// A long prompt arriving while a stream decodes: chunked prefill against one pass.
const LONG = 1200,
  LONG_ROUNDS = 5,
  ARRIVALS = [40, 80, 120, 160]
const longModel = new Gpt2LM({ vocabSize: 512, seqLen: 1536, dModel: 256, nLayers: 4, nHeads: 4 }, 0)
const longPrompt = Array.from({ length: LONG }, (_, i) => (i * 37 + 11) % tokenizer.vocabSize)
const modes = {
  chunked: await startServer({ model: longModel, tokenizer, name: 'bench', port: 0, accessLog: () => {} }),
  unchunked: await startServer({
    model: longModel,
    tokenizer,
    name: 'bench',
    port: 0,
    maxPrefillTokens: LONG,
    accessLog: () => {},
  }),
}
type Round = { itlP99: number; arrivalTtftP99: number; longTtft: number }
async function longRound(url: string, r: number): Promise<Round> {
  let late: Promise<Streamed[]> | undefined
  const decoding = await completion(
    url,
    { prompt: TEXT[r % TEXT.length]!, max_tokens: 40, seed: r },
    undefined,
    (n) => {
      if (n !== 3) return
      const t = performance.now()
      late = Promise.all([
        completion(url, { prompt: longPrompt, max_tokens: 4, seed: r }, t),
        // each short request is timed from when it was due, whenever the event loop got to send it
        ...ARRIVALS.map(
          (ms, i) =>
            new Promise<Streamed>((res, rej) =>
              setTimeout(
                () => completion(url, { prompt: TEXT[i]!.slice(0, 40), max_tokens: 8, seed: i }, t + ms).then(res, rej),
                ms,
              ),
            ),
        ),
      ])
    },
  )
  const [long, ...short] = await late!
  const gaps = decoding.times.slice(1).map((t, i) => t - decoding.times[i]!)
  return {
    itlP99: q(gaps, 0.99),
    arrivalTtftP99: q(
      short.map((s) => s.ttftMs),
      0.99,
    ),
    longTtft: long!.ttftMs,
  }
}
const rounds: Record<keyof typeof modes, Round[]> = { chunked: [], unchunked: [] }
for (const url of [modes.chunked.url, modes.unchunked.url]) await longRound(url, 0) // warm-up
for (let r = 0; r < LONG_ROUNDS; r++)
  for (const mode of ['unchunked', 'chunked'] as const) {
    rounds[mode].push(await longRound(modes[mode].url, r))
    const x = rounds[mode].at(-1)!
    process.stderr.write(
      `long prompt round ${r} ${mode}: decode ITL p99 ${x.itlP99.toFixed(0)} ms, arrivals' TTFT p99 ` +
        `${x.arrivalTtftP99.toFixed(0)} ms, long prompt TTFT ${x.longTtft.toFixed(0)} ms\n`,
    )
  }
for (const [key, metric] of [
  ['itlP99', 'decode_itl_p99'],
  ['arrivalTtftP99', 'arrivals_ttft_p99'],
  ['longTtft', 'ttft'],
] as const) {
  const unchunked = median(rounds.unchunked.map((x) => x[key]))
  emit({ bench: 'serve', metric: `long_prompt_${metric}_unchunked`, value: unchunked, unit: 'ms' })
  emit({
    bench: 'serve',
    metric: `long_prompt_${metric}_chunked`,
    value: median(rounds.chunked.map((x) => x[key])),
    unit: 'ms',
    baseline: unchunked,
    lowerIsBetter: true,
  })
}
await modes.chunked.close()
await modes.unchunked.close()
longModel.dispose()

// GPT-2 small: 16 streams against one.
const gpt2Rounds = Number(process.env.SERVE_BENCH_GPT2_ROUNDS ?? '3')
if (!Number.isInteger(gpt2Rounds) || gpt2Rounds < 0) {
  process.stderr.write(
    `serve bench: SERVE_BENCH_GPT2_ROUNDS=${process.env.SERVE_BENCH_GPT2_ROUNDS} is not 0, 1, 2, …\n`,
  )
  process.exit(2)
}
if (gpt2Rounds > 0) {
  const small = new Gpt2LM({ vocabSize: 50257, seqLen: 1024, dModel: 768, nLayers: 12, nHeads: 12 }, 0)
  // the 512-id tokenizer: the server samples ids below its vocabulary only (speed does not depend on which)
  const big = await startServer({
    model: small,
    tokenizer,
    name: 'bench',
    port: 0,
    maxBatch: STREAMS,
    accessLog: () => {},
  })
  const cpuS = () => {
    const u = process.cpuUsage()
    return (u.user + u.system) / 1e6
  }
  const go = (i: number) =>
    completion(big.url, { prompt: TEXT[i % TEXT.length]!.slice(0, 60 + i), max_tokens: NEW_TOKENS, seed: i })
  await go(0)
  await Promise.all(Array.from({ length: STREAMS }, (_, i) => go(i)))
  const one: number[] = [],
    many: number[] = [],
    oneCpu: number[] = [],
    manyCpu: number[] = [],
    ttft1: number[] = [],
    ttftN: number[] = []
  for (let r = 0; r < gpt2Rounds; r++) {
    let t0 = performance.now(),
      c0 = cpuS(),
      n = 0
    for (let i = 0; i < 2; i++) {
      const s = await go(i)
      n += s.tokens
      ttft1.push(s.ttftMs)
    }
    one.push(n / ((performance.now() - t0) / 1000))
    oneCpu.push(n / (cpuS() - c0))
    t0 = performance.now()
    c0 = cpuS()
    const all = await Promise.all(Array.from({ length: STREAMS }, (_, i) => go(i)))
    const total = all.reduce((a, s) => a + s.tokens, 0)
    many.push(total / ((performance.now() - t0) / 1000))
    manyCpu.push(total / (cpuS() - c0))
    ttftN.push(...all.map((s) => s.ttftMs))
    process.stderr.write(
      `GPT-2 small round ${r}: 1 stream ${one.at(-1)!.toFixed(1)} tok/s, ${STREAMS} streams ` +
        `${many.at(-1)!.toFixed(1)} tok/s (${(many.at(-1)! / one.at(-1)!).toFixed(2)}x); load ` +
        `${os.loadavg()[0]!.toFixed(1)}\n`,
    )
  }
  const ratios = many.map((x, i) => x / one[i]!),
    cpuRatios = manyCpu.map((x, i) => x / oneCpu[i]!)
  emit({ bench: 'serve', metric: 'gpt2_small_tokens_per_s_1_stream', value: median(one), unit: 'tokens/s' })
  emit({
    bench: 'serve',
    metric: `gpt2_small_tokens_per_s_${STREAMS}_streams`,
    value: median(many),
    unit: 'tokens/s',
    baseline: median(one),
  })
  emit({ bench: 'serve', metric: `gpt2_small_${STREAMS}_vs_1_stream`, value: median(ratios), unit: 'x' })
  emit({ bench: 'serve', metric: `gpt2_small_${STREAMS}_vs_1_stream_cpu_time`, value: median(cpuRatios), unit: 'x' })
  emit({
    bench: 'serve',
    metric: `gpt2_small_ttft_p50_${STREAMS}_streams`,
    value: q(ttftN, 0.5),
    unit: 'ms',
    baseline: median(ttft1),
    lowerIsBetter: true,
  })
  emit({
    bench: 'serve',
    metric: `gpt2_small_ttft_p95_${STREAMS}_streams`,
    value: q(ttftN, 0.95),
    unit: 'ms',
    baseline: q(ttft1, 0.95),
    lowerIsBetter: true,
  })
  emit({
    bench: 'serve',
    metric: 'gpt2_small_ttft_p50_1_stream',
    value: median(ttft1),
    unit: 'ms',
    lowerIsBetter: true,
  })
  emit({
    bench: 'serve',
    metric: 'gpt2_small_ttft_p95_1_stream',
    value: q(ttft1, 0.95),
    unit: 'ms',
    lowerIsBetter: true,
  })
  await big.close()
  small.dispose()
}
