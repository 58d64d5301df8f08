import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { trainBpe } from '@marin/datakit'
import type { BpeTokenizer } from '@marin/datakit'
import type { CausalLM } from '@marin/levanter'
import { BatchCache, createModel, generate, initBackend, prefill } from '@marin/levanter'
import { Engine } from './engine.js'
import type { SequenceResult } from './engine.js'
import { startServer } from './server.js'
import type { RunningServer } from './server.js'

// At the end of the context, a prompt of P tokens gets at most C − P new tokens: prompt and completion together fit
// the model's C positions (vLLM's max_model_len and Hugging Face's max_length count both), so the whole text can be
// fed back as the next prompt. levanter's generate and marin serve's engine agree on the count and on the tokens.
const C = 16
const tiny = { vocabSize: 40, seqLen: C, dModel: 16, nLayers: 2, nHeads: 2 }
const promptOf = (n: number) => Array.from({ length: n }, (_, i) => (i * 7 + 3) % tiny.vocabSize)

beforeAll(async () => {
  await initBackend()
})

async function serveEngine(engine: Engine, prompt: readonly number[], maxTokens: number) {
  const tokens: number[] = []
  const r: SequenceResult = await engine.submit({
    prompt,
    maxTokens,
    temperature: 0,
    topP: 1,
    seed: 0,
    topLogprobs: 0,
    onToken: (e) => void tokens.push(e.token),
  })
  return { tokens, r }
}

/** The prompt and its completion fed back as one prompt: it must fit the KV cache's C positions. */
async function fitsAsPrompt(model: CausalLM, seq: readonly number[]): Promise<void> {
  const out = await prefill(model, [seq], false)
  const cache = new BatchCache()
  cache.add(out.kv, [seq.length])
  cache.dispose()
}

describe.each(['gpt2', 'llama'] as const)('%s at the end of the context', (type) => {
  test.for([9, 14, 15])('a %i-token prompt: generate and the engine give the same C − P tokens', async (P) => {
    const model = createModel({ type, ...tiny }, 3)
    const engine = new Engine(model)
    const prompt = promptOf(P)
    const want = generate(model, prompt, { maxNewTokens: 100, temperature: 0 })
    const got = await serveEngine(engine, prompt, 100)
    expect(want.tokens.length).toBe(C - P)
    expect(want.finish).toBe('length')
    expect(got.tokens).toEqual(want.tokens)
    expect(got.r).toMatchObject({ finish: 'length', completionTokens: C - P })
    await fitsAsPrompt(model, [...prompt, ...got.tokens])
    await expect(fitsAsPrompt(model, [...prompt, ...got.tokens, 0])).rejects.toThrow(/seqLen 16/)
    model.dispose()
  })

  test('max tokens of exactly what fits, or fewer, end with length at that count', async () => {
    const model = createModel({ type, ...tiny }, 4)
    const engine = new Engine(model)
    const prompt = promptOf(9)
    for (const max of [7, 3]) {
      const want = generate(model, prompt, { maxNewTokens: max, temperature: 0 })
      const got = await serveEngine(engine, prompt, max)
      expect(want.tokens.length).toBe(max)
      expect(got.tokens).toEqual(want.tokens)
      expect(got.r).toMatchObject({ finish: 'length', completionTokens: max })
    }
    model.dispose()
  })

  test('a prompt that fills the context gets no new tokens from generate or the engine, finish length', async () => {
    const model = createModel({ type, ...tiny }, 5)
    const engine = new Engine(model)
    expect(generate(model, promptOf(C), { maxNewTokens: 4, temperature: 0 })).toMatchObject({
      tokens: [],
      finish: 'length',
    })
    const got = await serveEngine(engine, promptOf(C), 4)
    expect(got.tokens).toEqual([])
    expect(got.r).toMatchObject({ finish: 'length', completionTokens: 0 })
    model.dispose()
  })
})

describe('marin serve near the end of the context', () => {
  let tokenizer: BpeTokenizer
  let model: CausalLM
  let server: RunningServer
  beforeAll(async () => {
    tokenizer = trainBpe(['the quick brown fox jumps over the lazy dog', 'a model predicts the next token'], {
      vocabSize: 300,
    })
    model = createModel({ type: 'gpt2', ...tiny, vocabSize: 300 }, 6)
    server = await startServer({ model, tokenizer, name: 'tiny', port: 0 })
  })
  afterAll(async () => {
    await server?.close()
    model?.dispose()
  })
  const post = async (route: string, body: unknown) => {
    const r = await fetch(`${server.url}/v1/${route}`, {
      method: 'POST',
      body: JSON.stringify(body),
      headers: { 'content-type': 'application/json' },
    })
    expect(r.status).toBe(200)
    return (await r.json()) as {
      choices: { text?: string; finish_reason: string }[]
      usage: { prompt_tokens: number; completion_tokens: number }
    }
  }

  test('completions asking for more tokens than fit get the C − P that fit, finish_reason length', async () => {
    const prompt = promptOf(9).map((t) => t + 100)
    const want = generate(model, prompt, { maxNewTokens: 12, temperature: 0 })
    expect(want.tokens.length).toBe(C - 9)
    const r = await post('completions', { model: 'tiny', prompt, max_tokens: 12, temperature: 0 })
    expect(r.usage).toEqual({ prompt_tokens: 9, completion_tokens: C - 9, total_tokens: C })
    expect(r.choices[0]!.finish_reason).toBe('length')
    expect(r.choices[0]!.text).toBe(tokenizer.decode(want.tokens))
  })

  test('a prompt one short of the context gets one token; one filling it gets none, finish_reason length', async () => {
    for (const P of [C - 1, C]) {
      const r = await post('completions', { model: 'tiny', prompt: promptOf(P), max_tokens: 5, temperature: 0 })
      expect(r.usage.completion_tokens).toBe(C - P)
      expect(r.choices[0]!.finish_reason).toBe('length')
    }
  })
})
