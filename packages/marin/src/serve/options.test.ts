import OpenAI from 'openai'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { trainBpe } from '@marin/datakit'
import type { BpeTokenizer } from '@marin/datakit'
import { Gpt2LM, initBackend } from '@marin/levanter'
import { applyLogitsProcessing } from './sampling.js'
import { startServer } from './server.js'
import type { AccessLogEntry, RunningServer } from './server.js'

const TEXT = ['the quick brown fox jumps over the lazy dog', 'a language model predicts the next token']

let tokenizer: BpeTokenizer
let model: Gpt2LM
let server: RunningServer
let client: OpenAI
const access: AccessLogEntry[] = []

beforeAll(async () => {
  await initBackend()
  tokenizer = trainBpe(TEXT, { vocabSize: 280 })
  model = new Gpt2LM({ vocabSize: 280, seqLen: 64, dModel: 32, nLayers: 2, nHeads: 4 }, 11)
  server = await startServer({ model, tokenizer, name: 'tiny', port: 0, accessLog: (e) => access.push(e) })
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 })
})

afterAll(async () => {
  await server?.close()
  model?.dispose()
})

const post = (route: string, body: object) =>
  fetch(`${server.url}${route}`, {
    method: 'POST',
    body: JSON.stringify(body),
    headers: { 'content-type': 'application/json' },
  })
const chat = { model: 'tiny', messages: [{ role: 'user', content: 'hello' }], max_tokens: 4 }

describe('options the server cannot honour are refused, never ignored', () => {
  test.each([
    ['/v1/chat/completions', { ...chat, tools: [{ type: 'function', function: { name: 'f' } }] }, 'tools'],
    ['/v1/chat/completions', { ...chat, tool_choice: 'auto' }, 'tool_choice'],
    ['/v1/chat/completions', { ...chat, functions: [{ name: 'f' }] }, 'functions'],
    ['/v1/chat/completions', { ...chat, response_format: { type: 'json_object' } }, 'response_format'],
    ['/v1/completions', { model: 'tiny', prompt: 'the', response_format: { type: 'json_object' } }, 'response_format'],
  ])('%s with %j → 400 naming the option', async (route, body, param) => {
    const res = await post(route, body)
    expect(res.status).toBe(400)
    const j = (await res.json()) as { error: { param: string; code: string; message: string } }
    expect(j.error.param).toBe(param)
    expect(j.error.code).toBe('unsupported_option')
    expect(j.error.message).toContain(param)
  })

  test('response_format {type: "text"} is what the server does anyway, so it is accepted', async () => {
    const res = await post('/v1/chat/completions', { ...chat, response_format: { type: 'text' } })
    expect(res.status).toBe(200)
  })
})

describe('logit_bias and the penalties', () => {
  const greedy = { model: 'tiny', prompt: 'the quick', max_tokens: 12, temperature: 0 }
  const ids = async (body: object) => {
    const r = await client.completions.create({ ...greedy, ...body, logprobs: 0 } as never)
    return (r as OpenAI.Completion).choices[0]!.logprobs!.tokens!.map((t) => tokenizer.encode(t)[0]!)
  }

  test('a +100 bias makes a token certain; a -100 bias bans one', async () => {
    const target = tokenizer.encode(' fox')[0]!
    expect(await ids({ logit_bias: { [target]: 100 } })).toEqual(Array(12).fill(target))
    const plain = await ids({})
    const banned = await ids({ logit_bias: { [plain[0]!]: -100 } })
    expect(banned).not.toContain(plain[0])
  })

  test('a bad logit_bias → 400 naming it', async () => {
    for (const bias of [{ x: 1 }, { 280: 1 }, { 3: 101 }]) {
      const res = await post('/v1/completions', { ...greedy, logit_bias: bias })
      expect(res.status).toBe(400)
      expect(((await res.json()) as { error: { param: string } }).error.param).toMatch(/^logit_bias/)
    }
  })

  test('a large presence penalty stops greedy decoding from repeating tokens', async () => {
    const plain = await ids({ max_tokens: 20 })
    expect(new Set(plain).size).toBeLessThan(plain.length) // the untrained model repeats itself
    const penalised = await ids({ max_tokens: 20, presence_penalty: 2, frequency_penalty: 2 })
    expect(penalised).not.toEqual(plain)
    expect(new Set(penalised).size).toBeGreaterThan(new Set(plain).size)
  })

  test('applyLogitsProcessing: bias added, presence once per seen token, frequency per occurrence', () => {
    const logits = new Float32Array([1, 1, 1, 1])
    const counts = new Map([
      [1, 1],
      [2, 3],
    ])
    const out = applyLogitsProcessing(logits, { logitBias: new Map([[3, 5]]), presence: 0.5, frequency: 0.25 }, counts)
    expect([...out]).toEqual([1, 1 - 0.5 - 0.25, 1 - 0.5 - 0.75, 6])
    expect([...logits]).toEqual([1, 1, 1, 1]) // the model's row is left alone
  })
})

describe('models and the access log', () => {
  test('created in /v1/models is the same on every call, across a second boundary', async () => {
    const first = (await client.models.list()).data[0]!.created
    const sec = Math.floor(Date.now() / 1000)
    while (Math.floor(Date.now() / 1000) === sec) await new Promise((r) => setTimeout(r, 20))
    const second = (await client.models.list()).data[0]!.created
    expect(second).toBe(first)
    expect(first).toBeLessThanOrEqual(sec)
  })

  test('one access-log line per request, with method, path, status and duration', async () => {
    access.length = 0
    await fetch(`${server.url}/v1/models`)
    await post('/v1/completions', { model: 'tiny', prompt: 'the', temperature: 'hot' })
    await fetch(`${server.url}/nowhere`)
    const s = await post('/v1/completions', { model: 'tiny', prompt: 'the', max_tokens: 3, stream: true })
    await s.text()
    expect(access.map((e) => [e.method, e.path, e.status])).toEqual([
      ['GET', '/v1/models', 200],
      ['POST', '/v1/completions', 400],
      ['GET', '/nowhere', 404],
      ['POST', '/v1/completions', 200],
    ])
    for (const e of access) expect(e.ms).toBeGreaterThanOrEqual(0)
  })
})

test('prompt token ids the tokenizer lacks get 400 naming prompt, also where the model pads its vocab', async () => {
  const padded = new Gpt2LM({ vocabSize: tokenizer.vocabSize + 20, seqLen: 16, dModel: 16, nLayers: 1, nHeads: 2 }, 1)
  const s = await startServer({ model: padded, tokenizer, name: 'tiny', port: 0, accessLog: () => {} })
  try {
    const res = await fetch(`${s.url}/v1/completions`, {
      method: 'POST',
      body: JSON.stringify({ model: 'tiny', prompt: [1, tokenizer.vocabSize + 3], max_tokens: 2 }),
      headers: { 'content-type': 'application/json' },
    })
    expect(res.status).toBe(400)
    expect(await res.json()).toMatchObject({
      error: { param: 'prompt', message: expect.stringContaining(`below ${tokenizer.vocabSize}`) },
    })
  } finally {
    await s.close()
    padded.dispose()
  }
})
