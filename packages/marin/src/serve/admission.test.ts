import OpenAI from 'openai'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { trainBpe } from '@marin/datakit'
import type { BpeTokenizer } from '@marin/datakit'
import { Gpt2LM, initBackend } from '@marin/levanter'
import { startServer } from './server.js'
import type { RunningServer, ServeOptions } from './server.js'

const SENTENCES = [
  'one client must not starve the others',
  'a small request gets its turn',
  'round robin between requests',
]

let tokenizer: BpeTokenizer
let model: Gpt2LM
const servers: RunningServer[] = []

beforeAll(async () => {
  await initBackend()
  tokenizer = trainBpe(SENTENCES, { vocabSize: 300 })
  model = new Gpt2LM({ vocabSize: 300, seqLen: 64, dModel: 32, nLayers: 2, nHeads: 4 }, 11)
})

afterAll(async () => {
  for (const s of servers) await s.close({ graceMs: 0 })
  model?.dispose()
})

async function serve(o: Partial<ServeOptions> = {}): Promise<{ server: RunningServer; client: OpenAI }> {
  const server = await startServer({ model, tokenizer, name: 'tiny', port: 0, ...o })
  servers.push(server)
  return { server, client: new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'x', maxRetries: 0 }) }
}

const until = async (cond: () => boolean) => {
  for (let i = 0; i < 3000 && !cond(); i++) await new Promise((r) => setTimeout(r, 10))
  expect(cond()).toBe(true)
}

const send = (url: string, method: string, body?: unknown) =>
  fetch(url, {
    method,
    headers: { 'content-type': 'application/json' },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  })

const errorShape = (type: string, param: string | null, code: string) => ({
  error: { message: expect.any(String), type, param, code },
})

describe('fair admission', () => {
  test('a small request finishes while a large one still has sequences ' +
    'waiting, and the large one completes unchanged', async () => {
    const { server, client } = await serve({ maxBatch: 2, maxSequencesPerRequest: 16 })
    const large = {
      model: 'tiny',
      prompt: ['one client', 'a small', 'round robin', 'the others'],
      n: 4,
      max_tokens: 8,
      temperature: 0.8,
      seed: 3,
      logprobs: 0,
    }
    const alone = await client.completions.create(large)
    expect(alone.choices.length).toBe(16)

    // The same request streamed; once it runs (and most of its sequences wait), a small one arrives.
    const events: string[] = []
    const texts = new Map<number, string>()
    let small: Promise<void> | undefined
    for await (const ch of await client.completions.create({ ...large, stream: true })) {
      for (const c of ch.choices) {
        if (!texts.has(c.index)) events.push(`large ${c.index} started`)
        texts.set(c.index, (texts.get(c.index) ?? '') + c.text)
      }
      if (!small) {
        expect(server.engine.load.queued).toBeGreaterThan(8)
        small = client.completions
          .create({ model: 'tiny', prompt: 'a small request', max_tokens: 2, seed: 1 })
          .then((r) => {
            expect(r.usage!.completion_tokens).toBe(2)
            events.push('small done')
          })
      }
    }
    events.push('large done')
    await small
    // Served first come, first served over sequences, the small request would wait behind all 16.
    const lastStart = Math.max(...[...texts.keys()].map((i) => events.indexOf(`large ${i} started`)))
    expect(events.indexOf('small done')).toBeGreaterThanOrEqual(0)
    expect(events.indexOf('small done')).toBeLessThan(lastStart)
    expect(texts.size).toBe(16)
    expect([...texts.entries()].sort((a, b) => a[0] - b[0]).map(([, t]) => t)).toEqual(alone.choices.map((c) => c.text))
  }, 120_000)
})

describe('limits', () => {
  test('prompts × n above the per-request cap → 400 naming the parameter', async () => {
    const { server, client } = await serve({ maxSequencesPerRequest: 8 })
    const url = `${server.url}/v1`
    const byN = await send(`${url}/completions`, 'POST', {
      model: 'tiny',
      prompt: ['a', 'b', 'c'],
      n: 3,
      max_tokens: 1,
    })
    expect(byN.status).toBe(400)
    const body = (await byN.json()) as { error: { message: string } }
    expect(body).toEqual(errorShape('invalid_request_error', 'n', 'invalid_value'))
    expect(body.error.message).toMatch(/9 sequences.*limit of 8/)
    const byPrompts = await send(`${url}/completions`, 'POST', {
      model: 'tiny',
      prompt: Array.from({ length: 9 }, () => 'a'),
      max_tokens: 1,
    })
    expect(byPrompts.status).toBe(400)
    expect(await byPrompts.json()).toEqual(errorShape('invalid_request_error', 'prompt', 'invalid_value'))
    const chat = await client.chat.completions
      .create({ model: 'tiny', messages: [{ role: 'user', content: 'x' }], n: 9, max_tokens: 1 })
      .catch((e: unknown) => e)
    expect(chat).toBeInstanceOf(OpenAI.BadRequestError)
    expect((chat as InstanceType<typeof OpenAI.BadRequestError>).param).toBe('n')
    // At the cap is fine.
    const ok = await client.completions.create({ model: 'tiny', prompt: ['a', 'b'], n: 4, max_tokens: 1 })
    expect(ok.choices.length).toBe(8)
  })

  test('a full queue → 429 with Retry-After; once it drains, requests are accepted again', async () => {
    const { server, client } = await serve({ maxBatch: 1, maxSequencesPerRequest: 4, maxQueuedSequences: 4 })
    const url = `${server.url}/v1/completions`
    const ac = new AbortController()
    const running = send(url, 'POST', { model: 'tiny', prompt: 'one', max_tokens: 60, stream: true }).then(
      async (res) => {
        const reader = res.body!.getReader()
        for (;;) if ((await reader.read()).done) break
      },
    )
    await until(() => server.engine.load.active === 1)
    const waiting = fetch(url, {
      method: 'POST',
      signal: ac.signal,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'tiny', prompt: ['a', 'b'], n: 2, max_tokens: 2 }),
    }).catch(() => undefined)
    await until(() => server.engine.load.queued === 4)
    const full = await send(url, 'POST', { model: 'tiny', prompt: 'c', max_tokens: 1 })
    expect(full.status).toBe(429)
    expect(Number(full.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
    expect(full.headers.get('retry-after')).toMatch(/^\d+$/)
    const fullBody = (await full.json()) as { error: { message: string } }
    expect(fullBody).toEqual(errorShape('rate_limit_error', null, 'queue_full'))
    expect(fullBody.error.message).toMatch(/no room for this request's 1 sequence.*4 waiting, at most 4/)
    const chat = await client.chat.completions
      .create({ model: 'tiny', messages: [{ role: 'user', content: 'x' }], max_tokens: 1, stream: true })
      .catch((e: unknown) => e)
    expect(chat).toBeInstanceOf(OpenAI.RateLimitError)
    ac.abort()
    await until(() => server.engine.load.queued === 0)
    await running
    await waiting
    const r = await client.completions.create({ model: 'tiny', prompt: 'c', max_tokens: 1 })
    expect(r.usage!.completion_tokens).toBe(1)
  }, 120_000)

  test('a per-request cap above the queue bound is refused at start', async () => {
    await expect(
      startServer({ model, tokenizer, port: 0, maxSequencesPerRequest: 8, maxQueuedSequences: 4 }),
    ).rejects.toThrow(/maxSequencesPerRequest 8.*maxQueuedSequences 4/)
  })
})

describe('request shape', () => {
  test('a request without model → 400 with param "model"', async () => {
    const { server } = await serve()
    for (const [route, body] of [
      ['completions', { prompt: 'a', max_tokens: 1 }],
      ['chat/completions', { messages: [{ role: 'user', content: 'a' }], max_tokens: 1 }],
    ] as const) {
      const res = await send(`${server.url}/v1/${route}`, 'POST', body)
      expect(res.status).toBe(400)
      const json = (await res.json()) as { error: { message: string } }
      expect(json).toEqual(errorShape('invalid_request_error', 'model', 'invalid_value'))
      expect(json.error.message).toContain('"tiny"')
    }
  })

  test.each([
    ['GET', '/v1/completions', 'POST'],
    ['PUT', '/v1/chat/completions', 'POST'],
    ['DELETE', '/v1/models', 'GET, HEAD'],
    ['POST', '/health', 'GET, HEAD'],
  ])('%s %s → 405 with Allow: %s', async (method, route, allow) => {
    const { server } = await serve()
    const res = await send(`${server.url}${route}`, method, method === 'GET' ? undefined : {})
    expect(res.status).toBe(405)
    expect(res.headers.get('allow')).toBe(allow)
    const json = (await res.json()) as { error: { message: string } }
    expect(json).toEqual(errorShape('invalid_request_error', null, 'method_not_allowed'))
    expect(json.error.message).toContain(route)
  })
})
