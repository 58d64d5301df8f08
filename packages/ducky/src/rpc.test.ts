import { setTimeout as sleep } from 'node:timers/promises'
import { afterEach, describe, expect, test } from 'vitest'
import { z } from 'zod'
import { connect } from './client.js'
import { RpcError } from './errors.js'
import type { ServiceImpl } from './handlers.js'
import { serve, type DuckyServer } from './server.js'
import { bidi, defineService, serverStream, unary } from './service.js'
import { Demo, recordingLogger } from './test-helpers.js'

const open: { close(): void }[] = []
const servers: DuckyServer[] = []
afterEach(async () => {
  for (const c of open.splice(0)) c.close()
  await Promise.all(servers.splice(0).map((s) => s.shutdown({ graceMs: 100 })))
})

let echoCalls = 0
const impl: ServiceImpl<typeof Demo> = {
  echo: ({ text, times }) => {
    echoCalls++
    return { text: text.repeat(times) }
  },
  tensor: ({ data }) => {
    let sum = 0
    for (const x of data) sum += x
    return { sum, data: data.map((x) => x * 2) }
  },
  count: async function* ({ to, delayMs }, ctx) {
    for (let i = 0; i < to && !ctx.signal.aborted; i++) {
      if (delayMs) await sleep(delayMs)
      yield { i }
    }
  },
  chunks: function* ({ n, floats }) {
    for (let k = 0; k < n; k++) yield { chunk: new Float32Array(floats).fill(k) }
  },
  sum: async function* (requests) {
    let total = 0
    for await (const { x } of requests) yield { total: (total += x) }
  },
  slow: async ({ ms }, ctx) => {
    await sleep(ms, undefined, { signal: ctx.signal }).catch(() => {})
    return { done: !ctx.signal.aborted }
  },
  broken: ({ kind }) => {
    if (kind === 'rpc') throw new RpcError('FAILED_PRECONDITION', 'the demo refuses; ask again later')
    if (kind === 'crash') throw new Error('boom: secret internals')
    return { ok: 'yes' } as unknown as { ok: boolean }
  },
}

async function start(log = recordingLogger()) {
  const server = await serve(Demo, impl, { logger: log })
  servers.push(server)
  const client = connect(Demo, server.address, { logger: log })
  open.push(client)
  return { server, client, log }
}

async function rejection(p: Promise<unknown>): Promise<RpcError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  )
  expect(err).toBeInstanceOf(RpcError)
  return err as RpcError
}

describe('typed round trips', () => {
  test('unary applies request defaults on the server', async () => {
    const { client } = await start()
    expect(await client.echo({ text: 'ab' })).toEqual({ text: 'ab' })
    expect(await client.echo({ text: 'ab', times: 3 })).toEqual({ text: 'ababab' })
  })

  test('server stream yields every message in order', async () => {
    const { client } = await start()
    const got: number[] = []
    for await (const { i } of client.count({ to: 5 })) got.push(i)
    expect(got).toEqual([0, 1, 2, 3, 4])
  })

  test('bidi stream answers each request while requests still flow', async () => {
    const { client } = await start()
    const got: number[] = []
    for await (const { total } of client.sum([{ x: 1 }, { x: 2 }, { x: 3 }])) got.push(total)
    expect(got).toEqual([1, 3, 6])
  })

  test('a Float32Array arrives as a Float32Array with the same values', async () => {
    const { client } = await start()
    const data = Float32Array.from({ length: 1000 }, (_, i) => i / 8)
    const res = await client.tensor({ name: 't', data })
    expect(res.data).toBeInstanceOf(Float32Array)
    expect(res.sum).toBeCloseTo(
      data.reduce((a, b) => a + b, 0),
      3,
    )
    expect(Array.from(res.data.subarray(0, 4))).toEqual([0, 0.25, 0.5, 0.75])
  })

  test('a 64 MiB binary payload goes both ways intact', async () => {
    const { client } = await start()
    const data = new Float32Array(16 * 1024 * 1024)
    for (let i = 0; i < data.length; i += 4096) data[i] = i % 1000
    data[data.length - 1] = 7
    const res = await client.tensor({ name: 'big', data }, { deadlineMs: 60_000 })
    expect(res.data.byteLength).toBe(64 * 1024 * 1024)
    expect(res.data[4096 * 3]).toBe(((4096 * 3) % 1000) * 2)
    expect(res.data[res.data.length - 1]).toBe(14)
  })

  test('streams of binary chunks', async () => {
    const { client } = await start()
    let k = 0
    for await (const { chunk } of client.chunks({ n: 4, floats: 1024 })) {
      expect(chunk).toBeInstanceOf(Float32Array)
      expect(chunk.length).toBe(1024)
      expect(chunk[1023]).toBe(k++)
    }
    expect(k).toBe(4)
  })

  test('streamed 1 MiB chunks stay distinct while the consumer lags behind the server', async () => {
    // Responses are encoded into one reused buffer; each chunk must still arrive as it was sent.
    const { client } = await start()
    let k = 0
    for await (const { chunk } of client.chunks({ n: 12, floats: 256 * 1024 })) {
      if (k % 4 === 0) await sleep(20)
      expect([chunk.length, chunk[0], chunk[chunk.length >> 1], chunk[chunk.length - 1]]).toEqual([256 * 1024, k, k, k])
      k++
    }
    expect(k).toBe(12)
  })
})

test('falsy messages (0, empty string, null) travel in every kind of call', async () => {
  const Scalars = defineService({
    name: 'ducky.test.Scalars',
    methods: {
      negate: unary(z.number(), z.number()),
      repeat: serverStream(z.string(), z.string()),
      echo: bidi(z.null(), z.null()),
    },
  })
  const server = await serve(
    Scalars,
    { negate: (x) => -x, repeat: (s) => [s, s], echo: (xs) => xs },
    { logger: recordingLogger() },
  )
  servers.push(server)
  const client = connect(Scalars, server.address, { logger: recordingLogger() })
  open.push(client)
  expect((await client.negate(0)) === 0).toBe(true) // JSON has no -0
  expect(await client.negate(5)).toBe(-5)
  const got: string[] = []
  for await (const s of client.repeat('')) got.push(s)
  expect(got).toEqual(['', ''])
  const nulls: null[] = []
  for await (const n of client.echo([null, null, null])) nulls.push(n)
  expect(nulls).toEqual([null, null, null])
})

test('a handler signal stays quiet after a call that completed normally', async () => {
  const One = defineService({
    name: 'ducky.test.One',
    methods: { get: unary(z.null(), z.null()), list: serverStream(z.null(), z.number()) },
  })
  const signals: AbortSignal[] = []
  const server = await serve(
    One,
    {
      get: (_req, ctx) => (signals.push(ctx.signal), null),
      list: function* (_req, ctx) {
        signals.push(ctx.signal)
        yield 1
      },
    },
    { logger: recordingLogger() },
  )
  servers.push(server)
  const client = connect(One, server.address, { logger: recordingLogger() })
  open.push(client)
  await client.get(null)
  for await (const _ of client.list(null));
  await sleep(100)
  expect(signals.map((s) => s.aborted)).toEqual([false, false])
})

describe('failures', () => {
  test('a malformed request is refused with INVALID_ARGUMENT naming the field, before the handler runs', async () => {
    const { client } = await start()
    const before = echoCalls
    const err = await rejection(client.echo({ text: 5 } as unknown as { text: string }))
    expect(err.code).toBe('INVALID_ARGUMENT')
    expect(err.grpcCode).toBe(3)
    expect(err.method).toBe('/ducky.test.Demo/echo')
    expect(err.details).toMatch(/field "text": .*expected string/i)
    expect(echoCalls).toBe(before)
  })

  test('nested field paths are named', async () => {
    const { client } = await start()
    const err = await rejection(client.tensor({ name: 'x', data: [1, 2] as never }))
    expect(err.details).toMatch(/field "data": .*Float32Array/)
  })

  test('a handler RpcError reaches the client with its code and details', async () => {
    const { client, log } = await start()
    const err = await rejection(client.broken({ kind: 'rpc' }))
    expect(err.code).toBe('FAILED_PRECONDITION')
    expect(err.details).toBe('the demo refuses; ask again later')
    expect(log.lines.filter((l) => l.level === 'error')).toEqual([])
  })

  test('any other handler error is INTERNAL, logged, and its message stays on the server', async () => {
    const { client, log } = await start()
    const err = await rejection(client.broken({ kind: 'crash' }))
    expect(err.code).toBe('INTERNAL')
    expect(err.details).not.toContain('secret internals')
    const line = log.lines.find((l) => l.level === 'error')
    expect(line?.obj.method).toBe('/ducky.test.Demo/broken')
    expect((line!.obj.err as Error).message).toContain('boom')
  })

  test('a handler response that fails its schema is INTERNAL and logged', async () => {
    const { client, log } = await start()
    const err = await rejection(client.broken({ kind: 'bad-response' }))
    expect(err.code).toBe('INTERNAL')
    expect(err.details).toMatch(/invalid response: field "ok"/)
    expect(
      log.lines.some((l) => l.level === 'error' && String((l.obj.err as Error).message).includes('field "ok"')),
    ).toBe(true)
  })

  test('a call past its deadline fails with DEADLINE_EXCEEDED and the handler sees the abort', async () => {
    const { client } = await start()
    const err = await rejection(client.slow({ ms: 5000 }, { deadlineMs: 100 }))
    expect(err.code).toBe('DEADLINE_EXCEEDED')
  })

  test('the client default deadline applies when the call sets none', async () => {
    const { server } = await start()
    const client = connect(Demo, server.address, { deadlineMs: 100, logger: recordingLogger() })
    open.push(client)
    expect((await rejection(client.slow({ ms: 5000 }))).code).toBe('DEADLINE_EXCEEDED')
    expect(await client.slow({ ms: 10 }, { deadlineMs: 5000 })).toEqual({ done: true })
  })

  test('aborting a signal cancels a stream mid-way', async () => {
    const { client } = await start()
    const ac = new AbortController()
    const got: number[] = []
    const err = await (async () => {
      try {
        for await (const { i } of client.count({ to: 1000, delayMs: 5 }, { signal: ac.signal })) {
          got.push(i)
          if (i === 3) ac.abort()
        }
      } catch (e) {
        return e as RpcError
      }
      return undefined
    })()
    expect(err?.code).toBe('CANCELLED')
    expect(got.length).toBeGreaterThanOrEqual(4)
    expect(got.length).toBeLessThan(1000)
  })

  test('aborting a unary call rejects with CANCELLED', async () => {
    const { client } = await start()
    const ac = new AbortController()
    const p = client.slow({ ms: 5000 }, { signal: ac.signal })
    setTimeout(() => ac.abort(), 50)
    expect((await rejection(p)).code).toBe('CANCELLED')
  })

  test('leaving a stream loop early cancels the call on the server', async () => {
    const { client } = await start()
    let seen = 0
    for await (const _ of client.count({ to: 1_000_000 })) if (++seen === 3) break
    expect(seen).toBe(3)
    expect(await client.echo({ text: 'still fine' })).toEqual({ text: 'still fine' })
  })

  test('an idempotent call is retried until the server is back on the same port', async () => {
    const log = recordingLogger()
    const first = await serve(Demo, impl, { logger: log })
    const port = first.port
    await first.shutdown({ graceMs: 100 })
    const client = connect(Demo, `127.0.0.1:${port}`, {
      logger: log,
      retry: { initialMs: 50, maxMs: 400, maxAttempts: 20 },
    })
    open.push(client)
    const pending = client.echo({ text: 'back' })
    await sleep(300)
    servers.push(await serve(Demo, impl, { port, logger: log }))
    expect(await pending).toEqual({ text: 'back' })
    expect(log.lines.some((l) => l.msg === 'retrying call' && l.obj.code === 'UNAVAILABLE')).toBe(true)
  })

  test('an idempotent stream is retried before its first response', async () => {
    const Ticks = defineService({
      name: 'ducky.test.Ticks',
      methods: { ticks: serverStream(z.number(), z.number(), { idempotent: true }) },
    })
    const impl = {
      ticks: function* (n: number) {
        for (let i = 0; i < n; i++) yield i
      },
    }
    const first = await serve(Ticks, impl, { logger: recordingLogger() })
    await first.shutdown({ graceMs: 100 })
    const client = connect(Ticks, first.address, {
      logger: recordingLogger(),
      retry: { initialMs: 50, maxMs: 400, maxAttempts: 20 },
    })
    open.push(client)
    const got: number[] = []
    const reading = (async () => {
      for await (const i of client.ticks(3)) got.push(i)
    })()
    await sleep(300)
    servers.push(await serve(Ticks, impl, { port: first.port, logger: recordingLogger() }))
    await reading
    expect(got).toEqual([0, 1, 2])
  })

  test('a non-idempotent call is not retried', async () => {
    const log = recordingLogger()
    const first = await serve(Demo, impl, { logger: log })
    await first.shutdown({ graceMs: 100 })
    const client = connect(Demo, first.address, { logger: log })
    open.push(client)
    expect((await rejection(client.slow({ ms: 1 }))).code).toBe('UNAVAILABLE')
    expect(log.lines.some((l) => l.msg === 'retrying call')).toBe(false)
  })
})
