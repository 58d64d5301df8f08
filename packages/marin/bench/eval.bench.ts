/**
 * @module `pnpm bench eval`: log-likelihood scoring throughput (requests/s) of the brown_cloze task,
 * over HTTP against `marin serve` (echo + logprobs, 8 prompts per request) with in-process scoring
 * of the same model as the baseline (so the ratio is what the HTTP path costs or gains).
 * Model: GPT-2, vocab 512, context 128, 4 layers, d_model 256, random init (speed does not depend on the weights).
 */
import { trainBpe } from '@marin/datakit'
import { Gpt2LM, initBackend } from '@marin/levanter'
import { emit, median } from '@marin/rigging/bench'
import { brownSentences, builtinTask } from '../src/eval/brown-tasks.js'
import { LocalLanguageModel } from '../src/eval/local-model.js'
import { OpenAICompletionsModel } from '../src/eval/openai-model.js'
import { runTask } from '../src/eval/run-task.js'
import { startServer } from '../src/serve/server.js'

const ITEMS = 16,
  ROUNDS = 3
await initBackend()
const tokenizer = trainBpe(brownSentences('in').slice(0, 3000), { vocabSize: 512 })
const model = new Gpt2LM({ vocabSize: 512, seqLen: 128, dModel: 256, nLayers: 4, nHeads: 4 }, 0)
const task = builtinTask('brown_cloze', { size: ITEMS })
const requests = ITEMS * 4
const server = await startServer({ model, tokenizer, name: 'bench', port: 0 })
try {
  const local = new LocalLanguageModel(model, tokenizer)
  const http = new OpenAICompletionsModel({ baseUrl: `${server.url}/v1`, model: 'bench' })
  await runTask(local, task, { limit: 2 }) // warm-up
  await runTask(http, task, { limit: 2 })
  const time = async (m: LocalLanguageModel | OpenAICompletionsModel) => {
    const t0 = performance.now()
    await runTask(m, task)
    return (performance.now() - t0) / 1000
  }
  const localS: number[] = [],
    httpS: number[] = []
  for (let r = 0; r < ROUNDS; r++) {
    localS.push(await time(local))
    httpS.push(await time(http))
  }
  emit({
    bench: 'marin',
    metric: 'eval_loglikelihood_requests_per_s_http',
    value: requests / median(httpS),
    unit: 'requests/s',
    baseline: requests / median(localS),
  })
  emit({
    bench: 'marin',
    metric: 'eval_loglikelihood_requests_per_s_in_process',
    value: requests / median(localS),
    unit: 'requests/s',
  })
} finally {
  await server.close({ graceMs: 0 })
}
