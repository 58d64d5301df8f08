/**
 * @module Request bodies of the OpenAI-compatible API as zod schemas. Unknown fields that change
 * nothing the server computes (`user`, `metadata`, …) are accepted and ignored; known ones are
 * checked, and the first bad one is named in the 400 error. Options that would change the output
 * but cannot be honoured here ({@link UNSUPPORTED}) are refused with a 400 naming them.
 */
import { z } from 'zod'

const stop = z.union([z.string(), z.array(z.string()).max(4)]).nullish()

const common = {
  model: z.string().optional(),
  max_tokens: z.number().int().min(0).nullish(),
  temperature: z.number().min(0).max(2).nullish(),
  top_p: z.number().gt(0).max(1).nullish(),
  top_k: z.number().int().min(1).nullish(),
  n: z.number().int().min(1).max(16).nullish(),
  stop,
  seed: z.number().int().nullish(),
  stream: z.boolean().nullish(),
  stream_options: z.object({ include_usage: z.boolean().optional() }).nullish(),
  /** Token id (as a string key) → bias added to its logit, -100…100. */
  logit_bias: z.record(z.string(), z.number().min(-100).max(100)).nullish(),
  presence_penalty: z.number().min(-2).max(2).nullish(),
  frequency_penalty: z.number().min(-2).max(2).nullish(),
}

/**
 * Request fields the server cannot honour, and why: a client that sends them expects behaviour
 * (tool calls, constrained JSON) it would silently not get. `response_format` `{type: "text"}` is
 * plain generation and so is accepted.
 */
export const UNSUPPORTED: Readonly<Record<string, string>> = {
  tools: 'tool calling is not supported',
  tool_choice: 'tool calling is not supported',
  functions: 'function calling is not supported',
  function_call: 'function calling is not supported',
  response_format: 'only {"type": "text"} is supported (no JSON mode or schemas)',
}

/** The first field of `body` in {@link UNSUPPORTED} that asks for something, if any. */
export function unsupportedOption(body: Record<string, unknown>): string | undefined {
  for (const k of Object.keys(UNSUPPORTED)) {
    const v = body[k]
    if (v == null) continue
    if (k === 'response_format' && typeof v === 'object' && (v as { type?: unknown }).type === 'text') continue
    return k
  }
  return undefined
}

export const CompletionRequest = z.object({
  ...common,
  prompt: z.union([z.string(), z.array(z.string()).min(1), z.array(z.number().int().min(0)).min(1)]),
  logprobs: z.number().int().min(0).max(20).nullish(),
  echo: z.boolean().nullish(),
})
export type CompletionRequest = z.output<typeof CompletionRequest>

export const ChatMessage = z.object({
  role: z.enum(['system', 'user', 'assistant', 'developer']),
  content: z.union([z.string(), z.array(z.object({ type: z.literal('text'), text: z.string() }))]),
})

export const ChatRequest = z.object({
  ...common,
  messages: z.array(ChatMessage).min(1),
  max_completion_tokens: z.number().int().min(0).nullish(),
  logprobs: z.boolean().nullish(),
  top_logprobs: z.number().int().min(0).max(20).nullish(),
})
export type ChatRequest = z.output<typeof ChatRequest>

/** "field.path: problem" of the first issue, and the field path OpenAI reports as `param`. */
export function describeIssue(err: z.ZodError): { param: string; message: string } {
  const issue = err.issues[0]!
  const param = issue.path.map(String).join('.') || 'body'
  return { param, message: `${param}: ${issue.message}` }
}
