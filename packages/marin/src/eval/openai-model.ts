/**
 * @module Evaluation against any OpenAI-compatible `/v1/completions` endpoint, as lm-eval-harness's
 * local-completions model does: log-likelihoods from `echo: true, logprobs: 1, max_tokens: 0`.
 */
import { MarinError } from '../errors.js'
import { continuationTokens } from './alignment.js'
import type { GenerateRequest, LanguageModel, LoglikelihoodRequest, LoglikelihoodResult } from './language-model.js'

export type OpenAICompletionsOptions = {
  /** Base URL up to and including `/v1`, e.g. `http://127.0.0.1:8000/v1`. */
  readonly baseUrl: string
  /** The `model` field sent with every request. */
  readonly model: string
  readonly apiKey?: string
  /** Prompts per HTTP request. @default 8 */
  readonly batchSize?: number
  /** Per-request timeout. @default 120000 */
  readonly timeoutMs?: number
}

type Choice = {
  index?: number
  text?: string
  logprobs?: {
    tokens?: string[]
    token_logprobs?: (number | null)[]
    text_offset?: number[]
    top_logprobs?: (Record<string, number> | null)[]
  } | null
}

/** A `LanguageModel` over HTTP. @example new OpenAICompletionsModel({ baseUrl: 'http://127.0.0.1:8000/v1', model:
 * 'tiny' }) */
export class OpenAICompletionsModel implements LanguageModel {
  readonly description: string
  private readonly url: string
  constructor(readonly options: OpenAICompletionsOptions) {
    this.url = `${options.baseUrl.replace(/\/+$/, '')}/completions`
    this.description = `${options.baseUrl} ${options.model}`
  }

  private async post(body: Record<string, unknown>): Promise<Choice[]> {
    const headers: Record<string, string> = { 'content-type': 'application/json' }
    if (this.options.apiKey) headers.authorization = `Bearer ${this.options.apiKey}`
    let res: Response | undefined
    // Scoring requests are idempotent: retry a dropped connection (a pooled keep-alive socket the
    // server closed while the client was busy) before giving up.
    for (let attempt = 1; !res; attempt++) {
      try {
        res = await fetch(this.url, {
          method: 'POST',
          headers,
          body: JSON.stringify({ model: this.options.model, ...body }),
          signal: AbortSignal.timeout(this.options.timeoutMs ?? 120_000),
        })
      } catch (err) {
        const code = (err as { cause?: { code?: string } }).cause?.code ?? ''
        if (attempt < 3 && /ECONNRESET|UND_ERR_SOCKET|EPIPE/.test(code)) continue
        throw new MarinError(
          'BAD_CONFIG',
          `eval endpoint ${this.url}: request failed (` +
            `${(err as Error).message}${code ? ` ${code}` : ''}); check the ` +
            `server is running and --endpoint is right`,
          { cause: err },
        )
      }
    }
    const text = await res.text()
    if (!res.ok)
      throw new MarinError('BAD_CONFIG', `eval endpoint ${this.url}: HTTP ${res.status}: ${text.slice(0, 300)}`)
    let json: { choices?: Choice[] }
    try {
      json = JSON.parse(text) as { choices?: Choice[] }
    } catch {
      throw new MarinError(
        'BAD_CONFIG',
        `eval endpoint ${this.url}: response is not JSON; is this an OpenAI-compatible server?`,
      )
    }
    if (!Array.isArray(json.choices))
      throw new MarinError('BAD_CONFIG', `eval endpoint ${this.url}: response has no "choices" array`)
    // Choices may come in any order; `index` says which prompt each answers.
    return json.choices.slice().sort((a, b) => (a.index ?? 0) - (b.index ?? 0))
  }

  async loglikelihood(requests: readonly LoglikelihoodRequest[]): Promise<LoglikelihoodResult[]> {
    const out: LoglikelihoodResult[] = []
    const bs = this.options.batchSize ?? 8
    for (let b = 0; b < requests.length; b += bs) {
      const batch = requests.slice(b, b + bs)
      const choices = await this.post({
        prompt: batch.map((r) => r.context + r.continuation),
        echo: true,
        logprobs: 1,
        max_tokens: 0,
        temperature: 0,
      })
      if (choices.length !== batch.length)
        throw new MarinError(
          'BAD_CONFIG',
          `eval endpoint ${this.url}: ${choices.length} choices for ${batch.length} prompts`,
        )
      batch.forEach((r, j) => {
        const what = `loglikelihood request ${b + j}`
        const lp = choices[j]!.logprobs
        if (!lp?.tokens || !lp.token_logprobs || !lp.text_offset)
          throw new MarinError(
            'BAD_CONFIG',
            `eval endpoint ${this.url}: ${what}: no ` +
              `logprobs.tokens/token_logprobs/text_offset; the server must ` +
              `support echo with logprobs`,
          )
        const text = r.context + r.continuation
        const cont = continuationTokens(lp.text_offset, text.length, r.context.length, what)
        let logprob = 0,
          greedy = true
        for (const i of cont) {
          const v = lp.token_logprobs[i]
          if (typeof v !== 'number')
            throw new MarinError('BAD_CONFIG', `eval endpoint ${this.url}: ${what}: token ${i} has no logprob`)
          logprob += v
          const top = lp.top_logprobs?.[i]
          if (top) greedy &&= !Object.values(top).some((x) => x > v + 1e-6)
        }
        out.push({ logprob, greedy, tokens: cont.length })
      })
    }
    return out
  }

  async generate(requests: readonly GenerateRequest[]): Promise<string[]> {
    const out: string[] = []
    for (const r of requests) {
      const [c] = await this.post({ prompt: r.context, max_tokens: r.maxTokens, temperature: 0 })
      out.push(c?.text ?? '')
    }
    return out
  }
}
