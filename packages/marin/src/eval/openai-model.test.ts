import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterEach, expect, test } from 'vitest'
import { OpenAICompletionsModel } from './openai-model.js'

const closers: (() => Promise<void>)[] = []
afterEach(async () => {
  for (const c of closers.splice(0)) await c()
})

/** A completions endpoint that drops the first `drops` connections, then answers with fixed echo logprobs. */
async function flaky(drops: number, status = 200) {
  let seen = 0
  const bodies: unknown[] = []
  const server = createServer((req, res) => {
    let data = ''
    req.on('data', (c) => (data += c))
    req.on('end', () => {
      if (seen++ < drops) return req.socket.destroy()
      bodies.push(JSON.parse(data))
      const choice = {
        index: 0,
        text: 'a b',
        logprobs: {
          tokens: ['a', ' b'],
          token_logprobs: [null, -1.5],
          text_offset: [0, 1],
          top_logprobs: [null, { ' c': -0.5 }],
        },
      }
      res
        .writeHead(status, { 'content-type': 'application/json' })
        .end(
          JSON.stringify(
            status === 200
              ? { choices: [choice] }
              : { error: { message: 'nope', type: 'invalid_request_error', param: 'prompt', code: null } },
          ),
        )
    })
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  closers.push(() => new Promise<void>((r) => server.close(() => r())))
  return { baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, bodies }
}

test(
  'log-likelihood via echo + logprobs: the request lm-eval sends, ' +
    'offsets pick the continuation, greedy from top_logprobs',
  async () => {
    const s = await flaky(0)
    const m = new OpenAICompletionsModel({ baseUrl: s.baseUrl, model: 'm', apiKey: 'k' })
    expect(await m.loglikelihood([{ context: 'a', continuation: ' b' }])).toEqual([
      { logprob: -1.5, greedy: false, tokens: 1 },
    ])
    expect(s.bodies[0]).toEqual({ model: 'm', prompt: ['a b'], echo: true, logprobs: 1, max_tokens: 0, temperature: 0 })
  },
)

test(
  'a dropped connection is retried; one that keeps dropping, or an ' + 'HTTP error, fails naming the endpoint',
  async () => {
    const once = await flaky(1)
    expect(
      (
        await new OpenAICompletionsModel({ baseUrl: once.baseUrl, model: 'm' }).loglikelihood([
          { context: 'a', continuation: ' b' },
        ])
      )[0]!.logprob,
    ).toBe(-1.5)
    const always = await flaky(10)
    await expect(
      new OpenAICompletionsModel({ baseUrl: always.baseUrl, model: 'm' }).loglikelihood([
        { context: 'a', continuation: ' b' },
      ]),
    ).rejects.toThrow(/eval endpoint http:\/\/127\.0\.0\.1:\d+\/v1\/completions: request failed/)
    const bad = await flaky(0, 400)
    await expect(
      new OpenAICompletionsModel({ baseUrl: bad.baseUrl, model: 'm' }).loglikelihood([
        { context: 'a', continuation: ' b' },
      ]),
    ).rejects.toThrow(/HTTP 400: .*nope/)
  },
)
