/** @module Shared pieces of ducky's tests: a demo service and a logger that records lines. */
import { z } from 'zod'
import { RpcError } from './errors.js'
import type { DuckyLogger } from './log.js'
import { bidi, defineService, serverStream, unary } from './service.js'

export const Demo = defineService({
  name: 'ducky.test.Demo',
  methods: {
    echo: unary(z.object({ text: z.string(), times: z.number().int().min(1).default(1) }), z.object({ text: z.string() }), { idempotent: true }),
    tensor: unary(z.object({ name: z.string(), data: z.instanceof(Float32Array) }), z.object({ sum: z.number(), data: z.instanceof(Float32Array) })),
    count: serverStream(z.object({ to: z.number().int().nonnegative(), delayMs: z.number().default(0) }), z.object({ i: z.number() })),
    chunks: serverStream(z.object({ n: z.number().int(), floats: z.number().int() }), z.object({ chunk: z.instanceof(Float32Array) })),
    sum: bidi(z.object({ x: z.number() }), z.object({ total: z.number() })),
    slow: unary(z.object({ ms: z.number() }), z.object({ done: z.boolean() })),
    broken: unary(z.object({ kind: z.enum(['rpc', 'crash', 'bad-response']) }), z.object({ ok: z.boolean() })),
  },
})

export type LogLine = { level: string; obj: Record<string, unknown>; msg: string | undefined }

/** A logger that keeps every line, for assertions on what was (and was not) logged. */
export function recordingLogger(): DuckyLogger & { lines: LogLine[] } {
  const lines: LogLine[] = []
  const at = (level: string) => (obj: object, msg?: string) => lines.push({ level, obj: obj as Record<string, unknown>, msg })
  return { lines, debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') }
}

/** A handler for methods a test never calls. */
export const notUsed = (): never => {
  throw new RpcError('UNIMPLEMENTED', 'not used here')
}

/** A Demo implementation whose every method is {@link notUsed}: for servers that only host other services. */
export const unusedDemo = { echo: notUsed, tensor: notUsed, count: notUsed, chunks: notUsed, sum: notUsed, slow: notUsed, broken: notUsed }
