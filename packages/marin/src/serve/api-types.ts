/**
 * @module Request bodies of the OpenAI-compatible API as zod schemas. Unknown fields are accepted
 * (clients send `user`, `logit_bias`, …) and ignored; known ones are checked, and the first bad
 * one is named in the 400 error.
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
