/** @module In-process evaluation over a levanter model and a datakit BPE tokenizer; tensors are read asynchronously, so
 * it runs on every backend (webgpu included). */
import type { BpeTokenizer } from '@marin/datakit'
import { generateAsync } from '@marin/levanter'
import type { CausalLM } from '@marin/levanter'
import * as tf from '@tensorflow/tfjs'
import { MarinError } from '../errors.js'
import { continuationTokens } from './alignment.js'
import type { GenerateRequest, LanguageModel, LoglikelihoodRequest, LoglikelihoodResult } from './language-model.js'

const decoder = new TextDecoder()

/** Token ids of `text` with the character offset where each token starts (as OpenAI's `text_offset`). */
export function tokenizeWithOffsets(tokenizer: BpeTokenizer, text: string): { ids: number[]; offsets: number[] } {
  const ids = tokenizer.encode(text)
  const offsets: number[] = []
  const bytes: number[] = []
  for (const id of ids) {
    // Offsets count characters of the decoded prefix, so multi-byte characters split across tokens land consistently.
    offsets.push(decoder.decode(Uint8Array.from(bytes)).length)
    for (const b of tokenizer.decodeBytes([id])) bytes.push(b)
  }
  return { ids, offsets }
}

function logSoftmaxAt(row: Float32Array, tok: number): { lp: number; greedy: boolean } {
  let max = -Infinity
  for (const v of row) max = Math.max(max, v)
  let s = 0
  for (const v of row) s += Math.exp(v - max)
  return { lp: row[tok]! - max - Math.log(s), greedy: !row.some((v) => v > row[tok]!) }
}

/**
 * A `LanguageModel` over a levanter `CausalLM` in this process.
 * @example new LocalLanguageModel(model, tokenizer).loglikelihood([{ context: 'The cat', continuation: ' sat' }])
 */
export class LocalLanguageModel implements LanguageModel {
  readonly description: string
  constructor(
    readonly model: CausalLM,
    readonly tokenizer: BpeTokenizer,
    description?: string,
  ) {
    this.description = description ?? `local:${model.config.type}`
  }

  async loglikelihood(requests: readonly LoglikelihoodRequest[]): Promise<LoglikelihoodResult[]> {
    const out: LoglikelihoodResult[] = []
    for (const [n, r] of requests.entries()) out.push(await this.score(r, `loglikelihood request ${n}`))
    return out
  }

  private async score(r: LoglikelihoodRequest, what: string): Promise<LoglikelihoodResult> {
    const text = r.context + r.continuation
    const { ids, offsets } = tokenizeWithOffsets(this.tokenizer, text)
    const cont = continuationTokens(offsets, text.length, r.context.length, what)
    const seqLen = this.model.config.seqLen
    // Like lm-eval, drop the oldest context tokens when the whole text does not fit.
    const start = Math.max(0, ids.length - 1 - seqLen)
    if (cont[0]! <= start)
      throw new MarinError(
        'BAD_CONFIG',
        `${what}: the continuation is ${ids.length - cont[0]!} tokens, ` +
          `more than the model's context ${seqLen}; shorten it`,
      )
    const input = ids.slice(start, ids.length - 1)
    const V = this.model.config.vocabSize
    // read asynchronously: on webgpu the logits live on the GPU
    const out = tf.tidy(() => this.model.forward(tf.tensor2d([input], [1, input.length], 'int32')))
    let logits: Float32Array
    try {
      logits = (await out.data()) as Float32Array
    } finally {
      out.dispose()
    }
    let logprob = 0,
      greedy = true
    for (const i of cont) {
      const row = logits.subarray((i - 1 - start) * V, (i - start) * V)
      const t = logSoftmaxAt(row, ids[i]!)
      logprob += t.lp
      greedy &&= t.greedy
    }
    return { logprob, greedy, tokens: cont.length }
  }

  async generate(requests: readonly GenerateRequest[]): Promise<string[]> {
    const seqLen = this.model.config.seqLen
    const out: string[] = []
    for (const r of requests) {
      const ids = this.tokenizer.encode(r.context)
      if (ids.length === 0)
        throw new MarinError('BAD_CONFIG', 'generate: the context is empty; give at least one token of context')
      const room = Math.max(1, seqLen - Math.min(r.maxTokens, seqLen - 1))
      const g = await generateAsync(this.model, ids.slice(-room), { maxNewTokens: r.maxTokens, temperature: 0 })
      out.push(this.tokenizer.decode(g.tokens))
    }
    return out
  }
}
