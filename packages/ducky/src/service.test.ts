import { describe, expect, expectTypeOf, test } from 'vitest'
import { z } from 'zod'
import type { DuckyClient, ResponseStream } from './client.js'
import { RpcError } from './errors.js'
import type { CallContext, ServiceImpl } from './handlers.js'
import { bidi, DEFAULT_MAX_MESSAGE_BYTES, defineService, methodPath, serverStream, unary } from './service.js'

const Jobs = defineService({
  name: 'marin.test.Jobs',
  methods: {
    submit: unary(
      z.object({ name: z.string(), retries: z.number().default(3) }),
      z.object({ id: z.string(), at: z.string().transform((s) => new Date(s)) }),
      { idempotent: true },
    ),
    logs: serverStream(z.object({ id: z.string() }), z.object({ line: z.string() })),
    chat: bidi(
      z.object({ text: z.string() }),
      z.object({ reply: z.string(), weights: z.instanceof(Float32Array).optional() }),
    ),
  },
})

describe('defineService', () => {
  test('keeps the kinds, schemas and idempotency', () => {
    expect(Jobs.methods.submit.kind).toBe('unary')
    expect(Jobs.methods.submit.idempotent).toBe(true)
    expect(Jobs.methods.logs.kind).toBe('serverStream')
    expect(Jobs.methods.logs.idempotent).toBe(false)
    expect(Jobs.methods.chat.kind).toBe('bidi')
    expect(methodPath(Jobs, 'submit')).toBe('/marin.test.Jobs/submit')
  })

  test(
    'methods get 4 MiB limits each way unless they declare their ' +
      'own, and bad limits are refused naming the method',
    () => {
      expect(Jobs.methods.submit).toMatchObject({
        maxRequestBytes: DEFAULT_MAX_MESSAGE_BYTES,
        maxResponseBytes: DEFAULT_MAX_MESSAGE_BYTES,
      })
      expect(DEFAULT_MAX_MESSAGE_BYTES).toBe(4 * 1024 * 1024)
      expect(bidi(z.null(), z.null(), { maxRequestBytes: 100, maxResponseBytes: 200 })).toMatchObject({
        maxRequestBytes: 100,
        maxResponseBytes: 200,
      })
      expect(() =>
        defineService({ name: 'a.B', methods: { put: unary(z.null(), z.null(), { maxRequestBytes: 0 }) } }),
      ).toThrow(/method put has maxRequestBytes=0; pass a byte count from 1 to 4294967295/)
      expect(() =>
        defineService({ name: 'a.B', methods: { get: serverStream(z.null(), z.null(), { maxResponseBytes: 1.5 }) } }),
      ).toThrow(/method get has maxResponseBytes=1\.5/)
      expect(() =>
        defineService({ name: 'a.B', methods: { get: unary(z.null(), z.null(), { maxResponseBytes: 2 ** 32 }) } }),
      ).toThrow(RpcError)
    },
  )

  test('refuses bad service and method names with a message that says what to do', () => {
    expect(() => defineService({ name: 'bad name', methods: {} })).toThrow(
      /service name "bad name" is not a dotted identifier/,
    )
    expect(() => defineService({ name: 'a.B', methods: { close: unary(z.null(), z.null()) } })).toThrow(RpcError)
    expect(() => defineService({ name: 'a.B', methods: { 'x-y': unary(z.null(), z.null()) } })).toThrow(
      /method name "x-y" is not allowed/,
    )
  })
})

describe('types', () => {
  test('client methods take z.input and return z.output', () => {
    type C = DuckyClient<typeof Jobs>
    expectTypeOf<Parameters<C['submit']>[0]>().toEqualTypeOf<{ name: string; retries?: number | undefined }>()
    expectTypeOf<Awaited<ReturnType<C['submit']>>>().toEqualTypeOf<{ id: string; at: Date }>()
    expectTypeOf<ReturnType<C['logs']>>().toEqualTypeOf<ResponseStream<{ line: string }>>()
    expectTypeOf<Parameters<C['chat']>[0]>().toEqualTypeOf<
      AsyncIterable<{ text: string }> | Iterable<{ text: string }>
    >()
    expectTypeOf<ReturnType<C['chat']>>().toEqualTypeOf<
      ResponseStream<{ reply: string; weights?: Float32Array<ArrayBuffer> | undefined }>
    >()
    expectTypeOf<C['close']>().toEqualTypeOf<() => void>()
  })

  test('handlers receive z.output and return z.input', () => {
    type I = ServiceImpl<typeof Jobs>
    expectTypeOf<Parameters<I['submit']>[0]>().toEqualTypeOf<{ name: string; retries: number }>()
    expectTypeOf<Parameters<I['submit']>[1]>().toEqualTypeOf<CallContext>()
    expectTypeOf<Awaited<ReturnType<I['submit']>>>().toEqualTypeOf<{ id: string; at: string }>()
    expectTypeOf<Parameters<I['chat']>[0]>().toEqualTypeOf<AsyncIterable<{ text: string }>>()
    // A wrong handler does not compile.
    // @ts-expect-error: `line` must be a string
    const bad: I['logs'] = async function* () {
      yield { line: 1 }
    }
    expect(typeof bad).toBe('function')
  })
})
