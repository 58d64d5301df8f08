import { afterEach, expect, test } from 'vitest'
import { z } from 'zod'
import { connect } from './client.js'
import { RpcError } from './errors.js'
import { serve, type DuckyServer } from './server.js'
import { DEFAULT_MAX_MESSAGE_BYTES, defineService, unary } from './service.js'
import { recordingLogger } from './test-helpers.js'
import { clientLimits, grpcOptions, serverLimits } from './transport.js'

const servers: DuckyServer[] = []
const clients: { close(): void }[] = []
afterEach(async () => {
  for (const c of clients.splice(0)) c.close()
  await Promise.all(servers.splice(0).map((s) => s.shutdown({ graceMs: 100 })))
})

test('keepalive and message size limits become grpc-js options', () => {
  expect(
    grpcOptions(
      { keepalive: { timeMs: 5000, timeoutMs: 1000, permitWithoutCalls: false } },
      { sendBytes: 1024, receiveBytes: 2048 },
    ),
  ).toEqual({
    'grpc.max_send_message_length': 1024,
    'grpc.max_receive_message_length': 2048,
    'grpc.keepalive_time_ms': 5000,
    'grpc.keepalive_timeout_ms': 1000,
    'grpc.keepalive_permit_without_calls': 0,
  })
})

test("a channel's limits are the largest its service's methods declare, never under the default", () => {
  const Mixed = defineService({
    name: 'ducky.test.Mixed',
    methods: {
      small: unary(z.object({}), z.object({})),
      push: unary(z.object({}), z.object({}), { maxRequestBytes: 64 * 1024 * 1024 }),
      pull: unary(z.object({}), z.object({}), { maxResponseBytes: 32 * 1024 * 1024 }),
      tiny: unary(z.object({}), z.object({}), { maxRequestBytes: 1024, maxResponseBytes: 1024 }),
    },
  })
  expect(serverLimits(Object.values(Mixed.methods))).toEqual({
    receiveBytes: 64 * 1024 * 1024,
    sendBytes: 32 * 1024 * 1024,
  })
  expect(clientLimits(Mixed)).toEqual({ sendBytes: 64 * 1024 * 1024, receiveBytes: 32 * 1024 * 1024 })
  expect(serverLimits([])).toEqual({ receiveBytes: DEFAULT_MAX_MESSAGE_BYTES, sendBytes: DEFAULT_MAX_MESSAGE_BYTES })
})

test('a method limit smaller than the default is held too', async () => {
  const Blob = defineService({
    name: 'ducky.test.Blob',
    methods: {
      put: unary(z.object({ bytes: z.instanceof(Uint8Array) }), z.object({ n: z.number() }), {
        maxRequestBytes: 64 * 1024,
      }),
    },
  })
  const server = await serve(
    Blob,
    { put: ({ bytes }) => ({ n: bytes.length }) },
    { logger: recordingLogger(), keepalive: { timeMs: 10_000 } },
  )
  servers.push(server)
  const client = connect(Blob, server.address, { logger: recordingLogger(), keepalive: { timeMs: 10_000 } })
  clients.push(client)
  expect(await client.put({ bytes: new Uint8Array(1000) })).toEqual({ n: 1000 })
  const err = (await client.put({ bytes: new Uint8Array(100 * 1024) }).catch((e: unknown) => e)) as RpcError
  expect(err).toBeInstanceOf(RpcError)
  expect(err.code).toBe('RESOURCE_EXHAUSTED')
  expect(err.details).toMatch(/over the limit of 65536 bytes \(64 KiB\)/)
})
