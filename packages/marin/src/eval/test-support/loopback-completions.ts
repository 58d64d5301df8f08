/**
 * @module A minimal OpenAI-compatible `/v1/completions` endpoint on loopback over an in-process
 * model, for tests of the HTTP evaluation path: `echo` + `logprobs` (tokens, token_logprobs,
 * text_offset, top_logprobs) with `max_tokens: 0`, and greedy generation.
 */
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { BpeTokenizer } from '@marin/datakit'
import { generateAsync } from '@marin/levanter'
import type { CausalLM } from '@marin/levanter'
import * as tf from '@tensorflow/tfjs'
import { tokenizeWithOffsets } from '../local-model.js'

type Body = { prompt: string | string[]; echo?: boolean; logprobs?: number; max_tokens?: number }

async function echoChoice(model: CausalLM, tok: BpeTokenizer, prompt: string, index: number) {
  const { ids, offsets } = tokenizeWithOffsets(tok, prompt)
  const V = model.config.vocabSize
  const out = tf.tidy(() => model.forward(tf.tensor2d([ids], [1, ids.length], 'int32')))
  let logits: Float32Array
  try {
    logits = (await out.data()) as Float32Array // asynchronous: the model may live on webgpu
  } finally {
    out.dispose()
  }
  const tokenLogprobs: (number | null)[] = [null]
  const top: (Record<string, number> | null)[] = [null]
  for (let i = 1; i < ids.length; i++) {
    const row = logits.subarray((i - 1) * V, i * V)
    let max = -Infinity,
      arg = 0
    row.forEach((v, j) => {
      if (v > max) {
        max = v
        arg = j
      }
    })
    let s = 0
    for (const v of row) s += Math.exp(v - max)
    const lse = max + Math.log(s)
    tokenLogprobs.push(row[ids[i]!]! - lse)
    top.push({ [tok.decode([arg])]: row[arg]! - lse })
  }
  return {
    index,
    text: prompt,
    finish_reason: 'length',
    logprobs: {
      tokens: ids.map((i) => tok.decode([i])),
      token_logprobs: tokenLogprobs,
      text_offset: offsets,
      top_logprobs: top,
    },
  }
}

/** Start the endpoint on 127.0.0.1 (a free port); `baseUrl` ends in `/v1`. */
export async function startLoopbackCompletions(
  model: CausalLM,
  tok: BpeTokenizer,
): Promise<{ baseUrl: string; close: () => Promise<void> }> {
  const server = createServer((req, res) => {
    let data = ''
    req.on('data', (c) => (data += c))
    req.on('end', async () => {
      const send = (status: number, body: unknown) =>
        res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body))
      if (req.method !== 'POST' || req.url !== '/v1/completions')
        return send(404, { error: { message: 'not found', type: 'invalid_request_error', param: null, code: null } })
      try {
        const b = JSON.parse(data) as Body
        const prompts = Array.isArray(b.prompt) ? b.prompt : [b.prompt]
        const choices = []
        for (const [i, p] of prompts.entries()) {
          if (b.echo && (b.max_tokens ?? 16) === 0) choices.push(await echoChoice(model, tok, p, i))
          else {
            const g = await generateAsync(model, tok.encode(p), { maxNewTokens: b.max_tokens ?? 16, temperature: 0 })
            choices.push({ index: i, text: tok.decode(g.tokens), finish_reason: g.finish, logprobs: null })
          }
        }
        send(200, { id: 'cmpl-loopback', object: 'text_completion', created: 0, model: 'loopback', choices })
      } catch (err) {
        send(500, { error: { message: String(err), type: 'server_error', param: null, code: null } })
      }
    })
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const { port } = server.address() as AddressInfo
  return { baseUrl: `http://127.0.0.1:${port}/v1`, close: () => new Promise<void>((r) => server.close(() => r())) }
}
