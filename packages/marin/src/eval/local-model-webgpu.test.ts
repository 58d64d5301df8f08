/**
 * In-process evaluation (`LocalLanguageModel`) and the loopback completions endpoint on the webgpu
 * backend (SwiftShader where there is no GPU), where tensors can only be read asynchronously: the
 * same log-likelihoods (within 1e-4) and greedy text as on the cpu backend, from the same weights.
 */
import { trainBpe } from '@marin/datakit'
import type { BpeTokenizer } from '@marin/datakit'
import { Gpt2LM, initBackend } from '@marin/levanter'
import * as tf from '@tensorflow/tfjs'
import { beforeAll, expect, test } from 'vitest'
import type { LanguageModel, LoglikelihoodResult } from './language-model.js'
import { LocalLanguageModel } from './local-model.js'
import { OpenAICompletionsModel } from './openai-model.js'
import { startLoopbackCompletions } from './test-support/loopback-completions.js'

const cfg = { vocabSize: 262, seqLen: 16, dModel: 16, nLayers: 1, nHeads: 2 }
const requests = [
  { context: 'a b c', continuation: ' d' },
  { context: 'the cat', continuation: ' sat on' },
]
const contexts = [{ context: 'a b', maxTokens: 3 }]

let tok: BpeTokenizer
type Answers = { ll: LoglikelihoodResult[]; gen: string[] }
let onCpu: Answers
let httpOnCpu: Answers

async function overHttp(model: Gpt2LM): Promise<Answers> {
  const server = await startLoopbackCompletions(model, tok)
  try {
    return await answers(new OpenAICompletionsModel({ baseUrl: server.baseUrl, model: 'loopback' }))
  } finally {
    await server.close()
  }
}

async function answers(m: LanguageModel): Promise<Answers> {
  return { ll: await m.loglikelihood(requests), gen: await m.generate(contexts) }
}

beforeAll(async () => {
  tok = trainBpe(['a b c d e f', 'the cat sat on the mat'], { vocabSize: 262 })
  await tf.setBackend('cpu') // the reference, before the process's backend is chosen
  const model = new Gpt2LM(cfg, 5)
  onCpu = await answers(new LocalLanguageModel(model, tok))
  httpOnCpu = await overHttp(model)
  model.dispose()
  expect((await initBackend('webgpu')).name).toBe('webgpu')
}, 120_000)

function expectSame(got: Answers, want: Answers) {
  expect(got.gen).toEqual(want.gen)
  got.ll.forEach((r, i) => {
    expect(r.tokens).toBe(want.ll[i]!.tokens)
    expect(r.greedy).toBe(want.ll[i]!.greedy)
    expect(Math.abs(r.logprob - want.ll[i]!.logprob)).toBeLessThan(1e-4)
  })
}

test('LocalLanguageModel scores and generates on webgpu as on cpu', async () => {
  const model = new Gpt2LM(cfg, 5)
  expectSame(await answers(new LocalLanguageModel(model, tok)), onCpu)
  model.dispose()
}, 120_000)

test('the loopback completions endpoint serves a webgpu model as on cpu', async () => {
  const model = new Gpt2LM(cfg, 5)
  expectSame(await overHttp(model), httpOnCpu)
  model.dispose()
}, 120_000)
