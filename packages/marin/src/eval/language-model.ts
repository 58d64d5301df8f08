/** @module The model contract every evaluation task runs against: log-likelihoods and greedy generation over text. */

/** Score `continuation` given `context` (both text; context must not be empty). */
export type LoglikelihoodRequest = {
  readonly context: string
  readonly continuation: string
}

export type LoglikelihoodResult = {
  /** Σ log p(token | prefix) over the tokens of the continuation (natural log). */
  readonly logprob: number
  /** Whether every continuation token is the model's most likely token (lm-eval's `is_greedy`). */
  readonly greedy: boolean
  /** Number of tokens scored. */
  readonly tokens: number
}

/** Greedy generation from `context`, up to `maxTokens` new tokens. Stop sequences are applied by the caller. */
export type GenerateRequest = {
  readonly context: string
  readonly maxTokens: number
}

/**
 * A language model as evaluation sees it: text in, numbers out. Implemented in-process
 * (`LocalLanguageModel`) and over any OpenAI-compatible endpoint (`OpenAICompletionsModel`).
 *
 * Tokenization contract (both implementations): the full text `context + continuation` is
 * tokenized once, and the continuation's tokens are those that end after the context's last
 * character (OpenAI's `text_offset` plus the token's length). Callers move trailing whitespace
 * from the context to the continuation (as lm-eval does) so the boundary falls between tokens.
 */
export interface LanguageModel {
  /** A short description for results (`local:gpt2`, `http://host/v1 model`). */
  readonly description: string
  loglikelihood(requests: readonly LoglikelihoodRequest[]): Promise<LoglikelihoodResult[]>
  generate(requests: readonly GenerateRequest[]): Promise<string[]>
}

/** Move trailing whitespace of the context to the front of the continuation, as lm-eval-harness does. */
export function splitBoundary(context: string, continuation: string): LoglikelihoodRequest {
  const trail = /\s*$/.exec(context)![0]
  return { context: context.slice(0, context.length - trail.length), continuation: trail + continuation }
}
