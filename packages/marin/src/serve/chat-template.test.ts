import { spawn } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import OpenAI from 'openai'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { trainBpe } from '@marin/datakit'
import type { BpeTokenizer } from '@marin/datakit'
import { Gpt2LM, exportHf, initBackend } from '@marin/levanter'
import { CHATML, chatTemplateFromConfig } from './chat-template.js'
import { loadModel } from './load-model.js'
import { startServer } from './server.js'

/** The chat template of a widely used instruction-tuned model's tokenizer_config.json (Zephyr style). */
const ZEPHYR =
  "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\n' + message['content'] + " +
  "eos_token }}\n{% elif message['role'] == 'system' %}\n{{ '<|system|>\n' + message['content'] + eos_token }}\n" +
  "{% elif message['role'] == 'assistant' %}\n{{ '<|assistant|>\n'  + message['content'] + eos_token }}\n" +
  "{% endif %}\n{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}"

/** Llama-2 style: a bos token, and an exception when the roles do not alternate. */
const STRICT =
  "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}" +
  "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}" +
  "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}" +
  "{% else %}{{ ' ' + message['content'] + eos_token }}{% endif %}{% endfor %}"

/** Polls URL/health every 20 ms until stdin ends, then prints the slowest answer's time. */
const HEALTH_POLLER = `
let worstMs = 0, polls = 0, errors = 0, stop = false
process.stdin.on('end', () => (stop = true)).resume()
;(async () => {
  while (!stop) {
    const t = performance.now()
    try { await (await fetch(process.argv[1] + '/health')).text() } catch { errors++ }
    worstMs = Math.max(worstMs, performance.now() - t); polls++
    await new Promise((r) => setTimeout(r, 20))
  }
  console.log(JSON.stringify({ worstMs: Math.round(worstMs), polls, errors }))
})()`

const messages = [
  { role: 'system', content: 'be brief' },
  { role: 'user', content: 'the quick fox' },
]

describe('chat templates from tokenizer_config.json', () => {
  test('a Jinja chat_template renders the turns and the generation prompt; eos_token is the stop', async () => {
    const t = chatTemplateFromConfig({ chat_template: ZEPHYR, eos_token: '</s>' }, 'tokenizer_config.json')!
    expect(await t.render(messages)).toBe('<|system|>\nbe brief</s>\n<|user|>\nthe quick fox</s>\n<|assistant|>\n')
    expect(t.stops).toEqual(['</s>'])
  })

  test('bos_token and eos_token as AddedToken objects; a named template list picks "default"', async () => {
    const t = chatTemplateFromConfig(
      {
        chat_template: [
          { name: 'tool_use', template: 'tools!' },
          { name: 'default', template: STRICT },
        ],
        bos_token: { content: '<s>', lstrip: false },
        eos_token: { content: '</s>' },
      },
      'tokenizer_config.json',
    )!
    await expect(
      t.render([
        { role: 'user', content: 'hi' },
        { role: 'assistant', content: 'yo' },
        { role: 'user', content: 'ok' },
      ]),
    ).resolves.toBe('<s>[INST] hi [/INST] yo</s>[INST] ok [/INST]')
    await expect(t.render([{ role: 'assistant', content: 'x' }])).rejects.toThrow(/roles must alternate/)
    await t.close?.()
  })

  test('no chat_template → none (the server falls back to ChatML); a broken one names the file', async () => {
    expect(chatTemplateFromConfig({ eos_token: '</s>' }, 'x/tokenizer_config.json')).toBeUndefined()
    expect(() => chatTemplateFromConfig({ chat_template: '{% for x in %}' }, 'x/tokenizer_config.json')).toThrow(
      /x\/tokenizer_config.json: chat_template/,
    )
    expect(await CHATML.render([{ role: 'user', content: 'hi' }])).toBe(
      '<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n',
    )
  })
})

describe('marin serve uses the checkpoint chat template', () => {
  let tokenizer: BpeTokenizer
  let model: Gpt2LM
  let dir: string
  beforeAll(async () => {
    await initBackend()
    tokenizer = trainBpe(['the quick brown fox', 'be brief and kind'], { vocabSize: 270 })
    model = new Gpt2LM({ vocabSize: 270, seqLen: 256, dModel: 16, nLayers: 1, nHeads: 2 }, 3)
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'serve-chat-template-'))
    await exportHf(model, dir)
    fs.writeFileSync(path.join(dir, 'tokenizer.json'), JSON.stringify(tokenizer.toJSON()))
  })
  afterAll(() => {
    model?.dispose()
    if (dir) fs.rmSync(dir, { recursive: true, force: true })
  })

  const serveWith = async (config: object | undefined) => {
    const file = path.join(dir, 'tokenizer_config.json')
    if (config) fs.writeFileSync(file, JSON.stringify(config))
    else fs.rmSync(file, { force: true })
    const loaded = await loadModel({ checkpoint: dir })
    const server = await startServer({
      model: loaded.model,
      tokenizer: loaded.tokenizer,
      name: 'tiny',
      port: 0,
      accessLog: () => {},
      ...(loaded.chatTemplate ? { chatTemplate: loaded.chatTemplate } : {}),
    })
    return {
      server,
      client: new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'x', maxRetries: 0 }),
      close: async () => {
        await server.close()
        await loaded.chatTemplate?.close?.()
        loaded.model.dispose()
      },
    }
  }

  test('the prompt the model sees is the template rendering, ChatML only without one', async () => {
    const turns = messages as OpenAI.ChatCompletionMessageParam[]
    const zephyr = await serveWith({ chat_template: ZEPHYR, eos_token: '</s>' })
    try {
      const r = await zephyr.client.chat.completions.create({ model: 'tiny', messages: turns, max_tokens: 1 })
      const want = '<|system|>\nbe brief</s>\n<|user|>\nthe quick fox</s>\n<|assistant|>\n'
      expect(r.usage!.prompt_tokens).toBe(tokenizer.encode(want).length)
    } finally {
      await zephyr.close()
    }
    const plain = await serveWith(undefined)
    try {
      const r = await plain.client.chat.completions.create({ model: 'tiny', messages: turns, max_tokens: 1 })
      expect(r.usage!.prompt_tokens).toBe(tokenizer.encode(await CHATML.render(messages)).length)
    } finally {
      await plain.close()
    }
  })

  test("a template's raise_exception → 400 naming messages, with the template's message", async () => {
    const strict = await serveWith({ chat_template: STRICT, bos_token: '<s>', eos_token: '</s>' })
    try {
      const res = await fetch(`${strict.server.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'tiny', messages: [{ role: 'assistant', content: 'x' }], max_tokens: 1 }),
      })
      expect(res.status).toBe(400)
      const j = (await res.json()) as { error: { param: string; code: string; message: string } }
      expect(j.error).toMatchObject({ param: 'messages', code: 'chat_template_error' })
      expect(j.error.message).toContain('roles must alternate')
    } finally {
      await strict.close()
    }
  })

  test('a broken chat_template fails loading, naming tokenizer_config.json', async () => {
    fs.writeFileSync(path.join(dir, 'tokenizer_config.json'), JSON.stringify({ chat_template: '{% if %}' }))
    await expect(loadModel({ checkpoint: dir })).rejects.toMatchObject({
      code: 'BAD_USAGE',
      message: expect.stringContaining('tokenizer_config.json: chat_template'),
    })
  })

  test('a template past range() or the time budget → 400 BAD_TEMPLATE naming it; /health keeps answering', async () => {
    const bad = await serveWith({
      chat_template:
        '{% if messages[0].content == "range" %}{% for i in range(30000000) %}{% endfor %}{% endif %}' +
        '{% for i in range(100000) %}{% for j in range(100000) %}{{ j }}{% endfor %}{% endfor %}',
    })
    // The poller is its own process, as a load balancer is: the server's event loop must answer it.
    let slowMs = 0
    const poller = spawn(process.execPath, ['-e', HEALTH_POLLER, bad.server.url], {
      stdio: ['pipe', 'pipe', 'inherit'],
    })
    let out = ''
    poller.stdout.on('data', (d) => (out += d))
    const polled = new Promise((r) => poller.on('exit', r))
    try {
      await new Promise((r) => setTimeout(r, 300))
      const ask = async (content: string) => {
        const res = await fetch(`${bad.server.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content }], max_tokens: 1 }),
        })
        return { status: res.status, error: ((await res.json()) as { error: Record<string, string> }).error }
      }
      const range = await ask('range')
      expect(range.status).toBe(400)
      expect(range.error).toMatchObject({ param: 'messages', code: 'bad_template' })
      expect(range.error.message).toMatch(
        /tokenizer_config\.json: chat_template: .*range\(0, 30000000, 1\) makes 30000000/,
      )
      const t0 = performance.now()
      const slow = await ask('loop')
      slowMs = performance.now() - t0
      expect(slow.status).toBe(400)
      // The sandbox's own clock stops it; the worker's deadline is the backstop on a busy machine.
      expect(slow.error.message).toMatch(
        /chat_template: the template is refused: rendering (took longer than the 2000 |did not finish within 3000 )ms/,
      )
    } finally {
      poller.stdin.end()
      await polled
      await bad.close()
    }
    const health = JSON.parse(out) as { worstMs: number; polls: number; errors: number }
    expect(health.errors).toBe(0)
    expect(health.polls).toBeGreaterThan(10)
    // Rendering in line blocked /health for the whole render (101 s for range(30000000)); now it is another
    // thread's, so /health answers within scheduling noise of a busy machine, well inside the refused render.
    expect(slowMs).toBeGreaterThan(2000)
    expect(health.worstMs).toBeLessThan(slowMs / 2)
  }, 30_000)
})
