import { spawn } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import OpenAI from 'openai'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { trainBpe } from '@marin/datakit'
import { openStore, storeUrl } from '@marin/finestore'
import { Checkpointer, Gpt2LM, exportHf, initBackend } from '@marin/levanter'
import { loadModel } from './load-model.js'

const bin = path.resolve(import.meta.dirname, '../../bin/marin.js')
let prefix: string
let model: Gpt2LM
const tokenizer = trainBpe(['serving a checkpoint from the store', 'the model answers over http'], { vocabSize: 280 })

beforeAll(async () => {
  await initBackend()
  prefix = fs.mkdtempSync(path.join(os.tmpdir(), 'serve-cli-'))
  model = new Gpt2LM({ vocabSize: 280, seqLen: 48, dModel: 16, nLayers: 1, nHeads: 2 }, 3)
  const ckpt = await Checkpointer.open({ store: storeUrl(prefix), run: 'tiny' })
  const weights = await model.weights()
  const shapes = new Map([...weights.keys()].map((n) => [n, model.param(n).shape] as const))
  await ckpt.save(
    {
      step: 5,
      dataPosition: 0,
      rng: { seed: 0 },
      optimizerCount: 0,
      config: { model: model.config, trainer: {} },
      metrics: {},
    },
    { weights, optimizer: new Map(), count: 0 },
    shapes,
  )
  ckpt.close()
  fs.writeFileSync(path.join(prefix, 'tokenizer.json'), JSON.stringify(tokenizer.toJSON()))
})

afterAll(() => {
  model?.dispose()
  fs.rmSync(prefix, { recursive: true, force: true })
})

test(
  'loads the newest step of a levanter checkpoint artifact; ' + 'without a tokenizer it says to pass --tokenizer',
  async () => {
    await expect(loadModel({ checkpoint: 'checkpoints/tiny', prefix })).rejects.toMatchObject({
      code: 'BAD_USAGE',
      message: expect.stringContaining('--tokenizer'),
    })
    const loaded = await loadModel({
      checkpoint: 'checkpoints/tiny@1',
      prefix,
      tokenizerPath: path.join(prefix, 'tokenizer.json'),
    })
    expect(loaded.name).toBe('tiny')
    expect(await loaded.model.weights()).toEqual(await model.weights())
    loaded.model.dispose()
    await expect(
      loadModel({ checkpoint: 'checkpoints/none', prefix, tokenizerPath: path.join(prefix, 'tokenizer.json') }),
    ).rejects.toMatchObject({ code: 'BAD_USAGE', message: expect.stringContaining('checkpoints/none') })
  },
)

test(
  'loads a chosen checkpoint step, and an exported model artifact ' + 'with its own tokenizer, straight from the store',
  async () => {
    const tok = path.join(prefix, 'tokenizer.json')
    const step = await loadModel({ checkpoint: 'checkpoints/tiny@1:5', prefix, tokenizerPath: tok })
    expect(await step.model.weights()).toEqual(await model.weights())
    step.model.dispose()
    await expect(loadModel({ checkpoint: 'checkpoints/tiny:4', prefix, tokenizerPath: tok })).rejects.toMatchObject({
      code: 'BAD_USAGE',
      message: expect.stringContaining('kept steps are 5'),
    })
    const store = await openStore({ url: storeUrl(prefix) })
    await store.commit('models/tiny', async (txn) => {
      await exportHf(model, txn)
      await txn.put('tokenizer.json', JSON.stringify(tokenizer.toJSON()))
    })
    store.close()
    const exported = await loadModel({ checkpoint: 'models/tiny', prefix })
    expect(exported.name).toBe('models/tiny')
    expect(exported.tokenizer.encode('the model answers')).toEqual(tokenizer.encode('the model answers'))
    expect(await exported.model.weights()).toEqual(await model.weights())
    exported.model.dispose()
  },
)

test('marin serve runs as a process, answers the openai client, and exits 0 on SIGTERM', async () => {
  const child = spawn(
    process.execPath,
    [
      bin,
      'serve',
      '--model-checkpoint',
      'checkpoints/tiny',
      '--tokenizer',
      path.join(prefix, 'tokenizer.json'),
      '--port',
      '0',
    ],
    {
      env: { ...process.env, MARIN_PREFIX: prefix, LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  )
  let out = '',
    err = ''
  child.stderr.on('data', (d: Buffer) => (err += d.toString()))
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString()
      const m = /serving tiny at (http:\/\/\S+)/.exec(out)
      if (m) resolve(m[1]!)
    })
    child.once('exit', (code) => reject(new Error(`marin serve exited ${code}: ${err}`)))
  })
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve))
  try {
    const client = new OpenAI({ baseURL: url, apiKey: 'x', maxRetries: 0 })
    const r = await client.completions.create({ model: 'tiny', prompt: 'the model', max_tokens: 5, seed: 1 })
    expect(r.usage!.completion_tokens).toBe(5)
  } catch (e) {
    child.kill('SIGKILL') // a failed request must not leave the server running after the test
    throw e
  }
  child.kill('SIGTERM')
  expect(await exited).toBe(0)
  expect(out).toContain('stopped')
}, 60_000)

test('bad usage exits 2 naming the problem', async () => {
  const child = spawn(
    process.execPath,
    [bin, 'serve', '--model-checkpoint', 'checkpoints/tiny', '--api-key-file', path.join(prefix, 'missing')],
    { env: { ...process.env, MARIN_PREFIX: prefix, LOG_LEVEL: 'warn' }, stdio: ['ignore', 'pipe', 'pipe'] },
  )
  let err = ''
  child.stderr.on('data', (d: Buffer) => (err += d.toString()))
  expect(await new Promise((resolve) => child.once('exit', resolve))).toBe(2)
  expect(err).toContain('--api-key-file')
}, 60_000)

test('--help names the admission limits; a per-request cap above the ' +
  'queue bound exits 2 naming both flags', async () => {
  const env = { ...process.env, MARIN_PREFIX: prefix, LOG_LEVEL: 'warn' }
  const run = (args: string[]) =>
    new Promise<{ code: number | null; out: string; err: string }>((resolve) => {
      const child = spawn(process.execPath, [bin, 'serve', ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] })
      let out = '',
        err = ''
      child.stdout.on('data', (d: Buffer) => (out += d.toString()))
      child.stderr.on('data', (d: Buffer) => (err += d.toString()))
      child.once('exit', (code) => resolve({ code, out, err }))
    })
  const help = await run(['--help'])
  expect(help.code).toBe(0)
  expect(help.out).toMatch(/--max-sequences-per-request <n>[\s\S]*default: 256/)
  expect(help.out).toMatch(/--max-queued-sequences <n>[\s\S]*default: 1024/)
  const bad = await run([
    '--model-checkpoint',
    'checkpoints/tiny',
    '--max-sequences-per-request',
    '8',
    '--max-queued-sequences',
    '4',
  ])
  expect(bad.code).toBe(2)
  expect(bad.err).toMatch(/--max-sequences-per-request 8.*--max-queued-sequences 4/)
  const weights = await run(['--model-checkpoint', 'checkpoints/tiny', '--weights', 'fp16'])
  expect(weights.code).toBe(2)
  expect(weights.err).toContain('--weights fp16: give fp32 or bf16')
  expect(help.out).toMatch(/--weights <fp32\|bf16>[\s\S]*default: "fp32"/)
}, 60_000)
