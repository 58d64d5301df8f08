import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import OpenAI from 'openai'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { trainBpe } from '@marin/datakit'
import type { BpeTokenizer } from '@marin/datakit'
import type { CausalLM } from '@marin/levanter'
import { Gpt2LM, createModel, exportHf, generate, initBackend } from '@marin/levanter'
import { loadModel } from './load-model.js'
import { startServer } from './server.js'
import type { RunningServer } from './server.js'

const SENTENCES = [
  'the quick brown fox jumps over the lazy dog',
  'a language model predicts the next token of the text',
  'continuous batching shares one forward pass between requests',
  'the server speaks the same protocol as the openai api',
]

let tokenizer: BpeTokenizer
let model: Gpt2LM
let server: RunningServer
let client: OpenAI

beforeAll(async () => {
  await initBackend()
  tokenizer = trainBpe(SENTENCES, { vocabSize: 300 })
  model = new Gpt2LM({ vocabSize: 300, seqLen: 64, dModel: 32, nLayers: 2, nHeads: 4 }, 7)
  server = await startServer({ model, tokenizer, name: 'tiny', port: 0, maxTokensCap: 40, maxBodyBytes: 4096 })
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 })
})

afterAll(async () => {
  await server?.close()
  model?.dispose()
})

const post = (url: string, body: string, headers: Record<string, string> = {}) =>
  fetch(url, { method: 'POST', body, headers: { 'content-type': 'application/json', ...headers } })

describe('endpoints through the openai client', () => {
  test('models lists the served model', async () => {
    const page = await client.models.list()
    expect(page.data.map((m) => m.id)).toEqual(['tiny'])
  })

  test('completions: text, usage, stop strings, logprobs, and streaming gives the same text', async () => {
    const req = { model: 'tiny', prompt: 'the quick brown', max_tokens: 12, temperature: 0.8, seed: 5 }
    const r = await client.completions.create({ ...req, logprobs: 2 })
    const c = r.choices[0]!
    expect(r.usage).toMatchObject({ prompt_tokens: tokenizer.encode('the quick brown').length, completion_tokens: 12 })
    expect(c.finish_reason).toBe('length')
    expect(c.logprobs!.tokens!.length).toBe(12) // one entry per token (a byte-level token may be part of a character)
    expect(c.logprobs!.token_logprobs!.every((x) => x! <= 0)).toBe(true)
    expect(Object.keys(c.logprobs!.top_logprobs![0]!).length).toBe(2)
    const chunks: string[] = []
    let finish: string | null = null
    for await (const ch of await client.completions.create({ ...req, stream: true })) {
      chunks.push(ch.choices[0]!.text)
      finish = ch.choices[0]!.finish_reason ?? finish
    }
    expect(chunks.join('')).toBe(c.text)
    expect(finish).toBe('length')
    // A stop string taken from the text cuts it there.
    const stop = c.text.slice(3, 5)
    const stopped = await client.completions.create({ ...req, stop: [stop] })
    expect(stopped.choices[0]!.text).toBe(c.text.slice(0, c.text.indexOf(stop)))
    expect(stopped.choices[0]!.finish_reason).toBe('stop')
  })

  test('completions: a prompt list with n choices each; echo with logprobs scores the prompt', async () => {
    const r = await client.completions.create({
      model: 'tiny',
      prompt: ['a language', 'the server'],
      n: 2,
      max_tokens: 4,
      seed: 1,
    })
    expect(r.choices.map((c) => c.index)).toEqual([0, 1, 2, 3])
    const e = await client.completions.create({
      model: 'tiny',
      prompt: 'a language model',
      max_tokens: 0,
      echo: true,
      logprobs: 1,
    })
    const lp = e.choices[0]!.logprobs!
    expect(e.choices[0]!.text).toBe('a language model')
    expect(lp.tokens!.length).toBe(tokenizer.encode('a language model').length)
    expect(lp.token_logprobs![0]).toBeNull()
    expect(lp.token_logprobs!.slice(1).every((x) => typeof x === 'number' && x < 0)).toBe(true)
  })

  test('chat completions, plain and streaming, agree', async () => {
    const req = {
      model: 'tiny',
      messages: [{ role: 'user' as const, content: 'hello' }],
      max_tokens: 10,
      seed: 3,
      temperature: 0.7,
    }
    const r = await client.chat.completions.create({ ...req, logprobs: true, top_logprobs: 1 })
    expect(r.object).toBe('chat.completion')
    expect(r.choices[0]!.message.role).toBe('assistant')
    expect(r.choices[0]!.logprobs!.content!.length).toBe(r.usage!.completion_tokens)
    let text = ''
    let role: string | undefined
    for await (const ch of await client.chat.completions.create({
      ...req,
      stream: true,
      stream_options: { include_usage: true },
    })) {
      if (ch.choices[0]?.delta.role) role = ch.choices[0].delta.role
      text += ch.choices[0]?.delta.content ?? ''
      if (ch.usage) expect(ch.usage.completion_tokens).toBe(r.usage!.completion_tokens)
    }
    expect(role).toBe('assistant')
    expect(text).toBe(r.choices[0]!.message.content)
  })

  test('16 concurrent requests give the same outputs as one at a time', async () => {
    const reqs = Array.from({ length: 16 }, (_, i) => ({
      model: 'tiny',
      prompt: SENTENCES[i % 4]!.slice(0, 8 + i),
      max_tokens: 6 + (i % 5),
      temperature: 0.9,
      top_p: 0.9,
      seed: 100 + i,
    }))
    const serial: string[] = []
    for (const q of reqs) serial.push((await client.completions.create(q)).choices[0]!.text)
    const concurrent = await Promise.all(reqs.map(async (q) => (await client.completions.create(q)).choices[0]!.text))
    expect(concurrent).toEqual(serial)
    const streamed = await Promise.all(
      reqs.map(async (q) => {
        let t = ''
        for await (const ch of await client.completions.create({ ...q, stream: true })) t += ch.choices[0]?.text ?? ''
        return t
      }),
    )
    expect(streamed).toEqual(serial)
  })

  test('health and Prometheus metrics', async () => {
    expect(await (await fetch(`${server.url}/health`)).json()).toMatchObject({ status: 'ok' })
    const res = await fetch(`${server.url}/metrics`)
    expect(res.headers.get('content-type')).toContain('text/plain')
    const text = await res.text()
    expect(text).toMatch(/marin_serve_generated_tokens_total \d+/)
    expect(text).toContain('marin_serve_ttft_seconds_bucket')
    expect(text).toMatch(/marin_serve_requests_total\{route="\/v1\/completions",status="200"\} \d+/)
  })
})

describe('bad requests get their status and OpenAI error shape', () => {
  const shape = (param: string | null, code: string | null) => ({
    error: { message: expect.any(String), type: 'invalid_request_error', param, code },
  })

  test.each([
    ['invalid JSON', '{"prompt": ', null, 'invalid_json'],
    ['a wrong field type', JSON.stringify({ prompt: 'hi', temperature: 'hot' }), 'temperature', 'invalid_value'],
    ['a field out of range', JSON.stringify({ prompt: 'hi', top_p: 0 }), 'top_p', 'invalid_value'],
    ['a missing prompt', JSON.stringify({ max_tokens: 3 }), 'prompt', 'invalid_value'],
    [
      'max_tokens above the cap',
      JSON.stringify({ model: 'tiny', prompt: 'hi', max_tokens: 41 }),
      'max_tokens',
      'invalid_value',
    ],
    [
      'a prompt longer than the context',
      JSON.stringify({ model: 'tiny', prompt: 'zq'.repeat(100) }),
      'prompt',
      'context_length_exceeded',
    ],
  ])('%s → 400', async (_, body, param, code) => {
    const res = await post(`${server.url}/v1/completions`, body)
    expect(res.status).toBe(400)
    const json = (await res.json()) as { error: { message: string } }
    expect(json).toEqual(shape(param, code))
    if (param) expect(json.error.message).toContain(param)
  })

  test('the openai client sees a 400 as BadRequestError naming the field', async () => {
    const err = await client.chat.completions
      .create({ model: 'tiny', messages: [{ role: 'user', content: 'x' }], max_tokens: 99 })
      .catch((e: unknown) => e)
    expect(err).toBeInstanceOf(OpenAI.BadRequestError)
    expect((err as InstanceType<typeof OpenAI.BadRequestError>).param).toBe('max_tokens')
  })

  test('a body over the limit → 413; an unknown model → 404', async () => {
    const res = await post(`${server.url}/v1/completions`, JSON.stringify({ prompt: 'x'.repeat(5000) }))
    expect(res.status).toBe(413)
    expect(await res.json()).toEqual(shape(null, 'request_too_large'))
    const nf = await post(`${server.url}/v1/completions`, JSON.stringify({ model: 'other', prompt: 'x' }))
    expect(nf.status).toBe(404)
    expect(await nf.json()).toEqual(shape('model', 'model_not_found'))
  })

  test('a server with an API key → 401 without it, 200 with it', async () => {
    const locked = await startServer({ model, tokenizer, name: 'tiny', port: 0, apiKey: 'sesame' })
    try {
      const bad = await new OpenAI({ baseURL: `${locked.url}/v1`, apiKey: 'wrong', maxRetries: 0 }).models
        .list()
        .catch((e: unknown) => e)
      expect(bad).toBeInstanceOf(OpenAI.AuthenticationError)
      const none = await fetch(`${locked.url}/v1/models`)
      expect(none.status).toBe(401)
      expect(await none.json()).toEqual({
        error: {
          message: expect.stringContaining('API key'),
          type: 'authentication_error',
          param: null,
          code: 'invalid_api_key',
        },
      })
      const ok = await new OpenAI({ baseURL: `${locked.url}/v1`, apiKey: 'sesame', maxRetries: 0 }).models.list()
      expect(ok.data[0]!.id).toBe('tiny')
    } finally {
      await locked.close()
    }
  })
})

describe('lifecycle', () => {
  const until = async (cond: () => boolean) => {
    for (let i = 0; i < 500 && !cond(); i++) await new Promise((r) => setTimeout(r, 10))
    expect(cond()).toBe(true)
  }

  test('a client that disconnects mid-stream frees its slot', async () => {
    const ac = new AbortController()
    const res = await fetch(`${server.url}/v1/completions`, {
      method: 'POST',
      signal: ac.signal,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'tiny', prompt: 'the', max_tokens: 40, stream: true, seed: 1 }),
    })
    const reader = res.body!.getReader()
    await reader.read()
    expect(server.engine.load.active).toBe(1)
    ac.abort()
    await until(() => server.engine.load.active === 0)
  })

  test(
    'graceful shutdown: running requests are cancelled after the ' + 'grace period, new ones refused, the port freed',
    async () => {
      const s = await startServer({ model, tokenizer, name: 'tiny', port: 0, maxBatch: 1 })
      const c = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: 'x', maxRetries: 0 })
      const finishes: (string | null)[] = []
      const streaming = (async () => {
        for await (const ch of await c.completions.create({
          model: 'tiny',
          prompt: 'the',
          max_tokens: 60,
          stream: true,
        }))
          finishes.push(ch.choices[0]?.finish_reason ?? null)
      })()
      await until(() => s.engine.load.active === 1)
      // A grace of 0 ms ends long before 60 tokens are generated.
      const closing = s.close({ graceMs: 0 })
      await closing
      await streaming
      expect(finishes.at(-1)).toBe('abort')
      expect(s.engine.load).toEqual({ active: 0, queued: 0 })
      await expect(fetch(`${s.url}/health`)).rejects.toThrow()
    },
  )

  test('graceful shutdown lets a running request finish within the grace period', async () => {
    const s = await startServer({ model, tokenizer, name: 'tiny', port: 0 })
    const c = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: 'x', maxRetries: 0 })
    const running = c.completions.create({ model: 'tiny', prompt: 'the', max_tokens: 30, seed: 2 })
    // polled every turn of the event loop, not every 10 ms: with one native call per decode step the 30 tokens can
    // come and go between two timer ticks (the engine yields between steps, so a turn sees it running)
    for (let i = 0; i < 200_000 && s.engine.load.active !== 1; i++) await new Promise((r) => setImmediate(r))
    expect(s.engine.load.active).toBe(1)
    await s.close({ graceMs: 30_000 })
    const r = await running
    expect(r.usage!.completion_tokens).toBe(30)
    expect(r.choices[0]!.finish_reason).toBe('length')
  })

  test('loads a model and its tokenizer from an exported directory', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'serve-load-'))
    try {
      await exportHf(model, dir)
      await expect(loadModel({ checkpoint: dir })).rejects.toMatchObject({
        code: 'BAD_USAGE',
        message: expect.stringContaining('--tokenizer'),
      })
      fs.writeFileSync(path.join(dir, 'tokenizer.json'), JSON.stringify(tokenizer.toJSON()))
      const loaded = await loadModel({ checkpoint: dir })
      expect(loaded.tokenizer.encode('the fox')).toEqual(tokenizer.encode('the fox'))
      expect(await loaded.model.weights()).toEqual(await model.weights())
      loaded.model.dispose()
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })

  const hfCheckpoints = [
    // headDim ≠ dModel / nHeads
    { name: 'Qwen3', what: 'grouped-query, heads of 6', config: { type: 'qwen3', nHeads: 4, nKvHeads: 2, headDim: 6 } },
    {
      name: 'Mixtral',
      what: 'grouped-query, 2 of 4 experts',
      config: { type: 'mixtral', nHeads: 4, nKvHeads: 2, nExperts: 4, topK: 2, intermediateSize: 24 },
    },
  ] as const
  for (const { name, what, config } of hfCheckpoints)
    test(`serves a ${name} checkpoint directory (${what}): levanter generate's tokens`, async () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), `serve-${config.type}-`))
      const original = createModel({ vocabSize: 300, seqLen: 64, dModel: 16, nLayers: 2, ...config })
      let s: RunningServer | undefined
      let served: CausalLM | undefined
      try {
        await exportHf(original, dir)
        fs.writeFileSync(path.join(dir, 'tokenizer.json'), JSON.stringify(tokenizer.toJSON()))
        const loaded = await loadModel({ checkpoint: dir })
        served = loaded.model
        expect(loaded.model.config).toMatchObject(config)
        s = await startServer({ model: loaded.model, tokenizer: loaded.tokenizer, name, port: 0 })
        const c = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: 'x', maxRetries: 0 })
        const prompt = 'the lazy dog'
        const r = await c.completions.create({ model: name, prompt, max_tokens: 6, temperature: 0 })
        const want = generate(original, tokenizer.encode(prompt, { addSpecialTokens: true }), {
          maxNewTokens: 6,
          temperature: 0,
        })
        expect(r.usage!.completion_tokens).toBe(6)
        expect(r.choices[0]!.text).toBe(tokenizer.decode(want.tokens))
      } finally {
        await s?.close()
        served?.dispose()
        original.dispose()
        fs.rmSync(dir, { recursive: true, force: true })
      }
    })
})
