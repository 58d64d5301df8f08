import { afterEach, expect, test } from 'vitest'
import { z } from 'zod'
import { connect } from './client.js'
import { RpcError } from './errors.js'
import { serve, type DuckyServer } from './server.js'
import { defineService, unary } from './service.js'
import { recordingLogger } from './test-helpers.js'
import { DEFAULT_MAX_MESSAGE_BYTES, grpcOptions } from './transport.js'

const servers: DuckyServer[] = []
const clients: { close(): void }[] = []
afterEach(async () => {
  for (const c of clients.splice(0)) c.close()
  await Promise.all(servers.splice(0).map((s) => s.shutdown({ graceMs: 100 })))
})

test('keepalive and message size become grpc-js options', () => {
  expect(grpcOptions({ keepalive: { timeMs: 5000, timeoutMs: 1000, permitWithoutCalls: false }, maxMessageBytes: 1024 })).toEqual({
    'grpc.max_send_message_length': 1024,
    'grpc.max_receive_message_length': 1024,
    'grpc.keepalive_time_ms': 5000,
    'grpc.keepalive_timeout_ms': 1000,
    'grpc.keepalive_permit_without_calls': 0,
  })
  expect(grpcOptions({})['grpc.max_receive_message_length']).toBe(DEFAULT_MAX_MESSAGE_BYTES)
  expect(() => grpcOptions({ maxMessageBytes: -1 })).toThrow(/maxMessageBytes=-1 is not a positive integer/)
})

test('a message over the limit is refused with RESOURCE_EXHAUSTED', async () => {
  const Blob = defineService({ name: 'ducky.test.Blob', methods: { put: unary(z.object({ bytes: z.instanceof(Uint8Array) }), z.object({ n: z.number() })) } })
  const server = await serve(Blob, { put: ({ bytes }) => ({ n: bytes.length }) }, { maxMessageBytes: 64 * 1024, logger: recordingLogger(), keepalive: { timeMs: 10_000 } })
  servers.push(server)
  const client = connect(Blob, server.address, { logger: recordingLogger(), keepalive: { timeMs: 10_000 } })
  clients.push(client)
  expect(await client.put({ bytes: new Uint8Array(1000) })).toEqual({ n: 1000 })
  const err = (await client.put({ bytes: new Uint8Array(100 * 1024) }).catch((e: unknown) => e)) as RpcError
  expect(err).toBeInstanceOf(RpcError)
  expect(err.code).toBe('RESOURCE_EXHAUSTED')
})
