/**
 * @module `pnpm bench serve`: generated tokens/s of the OpenAI-compatible server for 1 stream and
 * for 16 concurrent streams (their ratio is the continuous-batching gain), and time to first token
 * p50/p99 under the 16-stream load, all over HTTP with streaming completions on loopback.
 * Model: GPT-2, vocab 512, context 128, 4 layers, d_model 256, 4 heads, random init (speed does
 * not depend on the weights); prompts of ~16 tokens, 32 new tokens each. Also the forward pass
 * alone: tokens/s of one decode step over 1 and 16 rows of a 40-position cache.
 */
import { trainBpe } from '@marin/datakit'
import { BatchCache, Gpt2LM, decodeStep, initBackend, prefill } from '@marin/levanter'
import { emit, median } from '@marin/rigging/bench'
import { startServer } from '../src/serve/server.js'

const NEW_TOKENS = 32,
  STREAMS = 16,
  ROUNDS = 3
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

/** One streaming completion: tokens generated and ms to the first one. */
async function stream(i: number): Promise<{ tokens: number; ttftMs: number }> {
  const t0 = performance.now()
  const res = await fetch(`${server.url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    // logprobs: 0 makes every token its own event, so the first event is the first token.
    body: JSON.stringify({
      model: 'bench',
      prompt: TEXT[i % TEXT.length]!.slice(0, 60 + i),
      max_tokens: NEW_TOKENS,
      seed: i,
      stream: true,
      logprobs: 0,
      stream_options: { include_usage: true },
    }),
  })
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader()
  let ttftMs = -1,
    tokens = 0,
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
      if (ttftMs < 0 && (ev.choices[0]?.logprobs?.tokens.length ?? 0) > 0) ttftMs = performance.now() - t0
      if (ev.usage) tokens = ev.usage.completion_tokens
    }
  }
  if (tokens !== NEW_TOKENS) throw new Error(`stream ${i}: ${tokens} tokens, expected ${NEW_TOKENS}`)
  return { tokens, ttftMs }
}

await stream(0) // warm-up: JIT, wasm kernels
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
const q = (xs: number[], p: number) =>
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
const step1 = await stepRate(1)
emit({ bench: 'serve', metric: 'decode_step_tokens_per_s_1_row', value: step1, unit: 'tokens/s' })
emit({
  bench: 'serve',
  metric: `decode_step_tokens_per_s_${STREAMS}_rows`,
  value: await stepRate(STREAMS),
  unit: 'tokens/s',
  baseline: step1,
})
model.dispose()
