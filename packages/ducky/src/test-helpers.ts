/** @module Shared pieces of ducky's tests: demo services and a logger that records lines. */
import { z } from 'zod'
import { RpcError } from './errors.js'
import type { DuckyLogger } from './log.js'
import { bidi, defineService, serverStream, unary } from './service.js'

export const Demo = defineService({
  name: 'ducky.test.Demo',
  methods: {
    echo: unary(
      z.object({ text: z.string(), times: z.number().int().min(1).default(1) }),
      z.object({ text: z.string() }),
      { idempotent: true },
    ),
    /** Carries bulk data (up to 128 MiB each way). */
    tensor: unary(
      z.object({ name: z.string(), data: z.instanceof(Float32Array) }),
      z.object({ sum: z.number(), data: z.instanceof(Float32Array) }),
      {
        maxRequestBytes: 128 * 1024 * 1024,
        maxResponseBytes: 128 * 1024 * 1024,
      },
    ),
    count: serverStream(
      z.object({ to: z.number().int().nonnegative(), delayMs: z.number().default(0) }),
      z.object({ i: z.number() }),
    ),
    chunks: serverStream(
      z.object({ n: z.number().int(), floats: z.number().int() }),
      z.object({ chunk: z.instanceof(Float32Array) }),
    ),
    sum: bidi(z.object({ x: z.number() }), z.object({ total: z.number() })),
    slow: unary(z.object({ ms: z.number() }), z.object({ done: z.boolean() })),
    broken: unary(z.object({ kind: z.enum(['rpc', 'crash', 'bad-response']) }), z.object({ ok: z.boolean() })),
  },
})

export const MiB = 1024 * 1024

const Data = z.object({ data: z.instanceof(Uint8Array) })
const Size = z.object({ bytes: z.number().int().nonnegative() })

/** Methods with the default message limits next to methods that declare large ones. */
export const Bulk = defineService({
  name: 'ducky.test.Bulk',
  methods: {
    /** A control call: default limits both ways. */
    note: unary(Data, Size),
    /** Takes up to 256 MiB. */
    upload: unary(Data, Size, { maxRequestBytes: 256 * MiB }),
    /** Answers with `bytes` bytes under the default response limit. */
    peek: unary(Size, Data),
    /** Answers with up to 64 MiB. */
    download: unary(Size, Data, { maxResponseBytes: 64 * MiB }),
  },
})

/** An implementation of {@link Bulk}: requests answer with their size, responses are zeros. */
export const bulkImpl = {
  note: ({ data }: { data: Uint8Array }) => ({ bytes: data.length }),
  upload: ({ data }: { data: Uint8Array }) => ({ bytes: data.length }),
  peek: ({ bytes }: { bytes: number }) => ({ data: new Uint8Array(bytes) }),
  download: ({ bytes }: { bytes: number }) => ({ data: new Uint8Array(bytes) }),
}

export type LogLine = { level: string; obj: Record<string, unknown>; msg: string | undefined }

/** A logger that keeps every line, for assertions on what was (and was not) logged. */
export function recordingLogger(): DuckyLogger & { lines: LogLine[] } {
  const lines: LogLine[] = []
  const at = (level: string) => (obj: object, msg?: string) =>
    lines.push({ level, obj: obj as Record<string, unknown>, msg })
  return { lines, debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') }
}

/** A handler for methods a test never calls. */
export const notUsed = (): never => {
  throw new RpcError('UNIMPLEMENTED', 'not used here')
}

/** A Demo implementation whose every method is {@link notUsed}: for servers that only host other services. */
export const unusedDemo = {
  echo: notUsed,
  tensor: notUsed,
  count: notUsed,
  chunks: notUsed,
  sum: notUsed,
  slow: notUsed,
  broken: notUsed,
}
