import { join } from 'node:path'
import { credentials, loadPackageDefinition, type Client, type ServiceError } from '@grpc/grpc-js'
import { loadSync } from '@grpc/proto-loader'
import { afterEach, expect, test } from 'vitest'
import type { RpcError } from './errors.js'
import { decodeHealthRequest, decodeHealthResponse, encodeHealthRequest, encodeHealthResponse } from './health.js'
import { checkHealth } from './health-check.js'
import { serve, type DuckyServer } from './server.js'
import { Demo, recordingLogger, unusedDemo } from './test-helpers.js'

const servers: DuckyServer[] = []
const clients: Client[] = []
afterEach(async () => {
  for (const c of clients.splice(0)) c.close()
  await Promise.all(servers.splice(0).map((s) => s.shutdown({ graceMs: 100 })))
})

type HealthClient = Client & {
  Check(req: { service: string }, cb: (err: ServiceError | null, res?: { status: string }) => void): void
  Watch(req: { service: string }): NodeJS.EventEmitter & { cancel(): void }
}

/** A plain grpc-js client built from the published health.proto: what any probe would send. */
function rawHealthClient(address: string): HealthClient {
  const pkg = loadPackageDefinition(
    loadSync(join(import.meta.dirname, 'fixtures/health.proto'), { enums: String, defaults: true }),
  ) as any
  const client = new pkg.grpc.health.v1.Health(address, credentials.createInsecure()) as HealthClient
  clients.push(client)
  return client
}

const check = (c: HealthClient, service: string) =>
  new Promise<{ status: string }>((resolve, reject) =>
    c.Check({ service }, (err, res) => (err ? reject(err) : resolve(res!))),
  )

test('a standard health probe is answered for the server and each service, without a token', async () => {
  const server = await serve(Demo, unusedDemo, { logger: recordingLogger(), token: 'needed-for-demo' })
  servers.push(server)
  const c = rawHealthClient(server.address)
  expect(await check(c, '')).toEqual({ status: 'SERVING' })
  expect(await check(c, 'ducky.test.Demo')).toEqual({ status: 'SERVING' })
  const err = (await check(c, 'no.such.Service').catch((e: unknown) => e)) as ServiceError
  expect(err.code).toBe(5) // NOT_FOUND, as the health protocol asks
  server.health.set('ducky.test.Demo', 'NOT_SERVING')
  expect(await check(c, 'ducky.test.Demo')).toEqual({ status: 'NOT_SERVING' })
  expect(await checkHealth(server.address)).toBe('SERVING')
})

test('Watch streams the current status, then each change, and ends at shutdown', async () => {
  const server = await serve(Demo, unusedDemo, { logger: recordingLogger() })
  const c = rawHealthClient(server.address)
  const seen: string[] = []
  const call = c.Watch({ service: 'ducky.test.Demo' })
  const ended = new Promise<void>((resolve) => {
    call.on('data', (r: { status: string }) => {
      seen.push(r.status)
      if (seen.length === 1) server.health.set('ducky.test.Demo', 'NOT_SERVING')
    })
    call.on('error', () => resolve())
    call.on('end', () => resolve())
  })
  while (seen.length < 2) await new Promise((r) => setTimeout(r, 10))
  await server.shutdown({ graceMs: 2000 })
  await ended
  expect(seen).toEqual(['SERVING', 'NOT_SERVING'])
})

test('Watch on an unknown service says SERVICE_UNKNOWN', async () => {
  const server = await serve(Demo, unusedDemo, { logger: recordingLogger() })
  servers.push(server)
  const call = rawHealthClient(server.address).Watch({ service: 'later.Service' })
  const first = await new Promise<{ status: string }>((resolve) => call.on('data', resolve))
  call.cancel()
  call.on('error', () => {})
  expect(first.status).toBe('SERVICE_UNKNOWN')
})

test('the hand-written protobuf codec matches the standard encoding', () => {
  expect(encodeHealthRequest('')).toEqual(Buffer.alloc(0))
  expect(encodeHealthRequest('a.B')).toEqual(Buffer.from([0x0a, 3, 0x61, 0x2e, 0x42]))
  expect(decodeHealthRequest(Buffer.from([0x0a, 3, 0x61, 0x2e, 0x42]))).toBe('a.B')
  // Unknown fields are skipped: a varint field 2 and a length-delimited field 3.
  expect(decodeHealthRequest(Buffer.from([0x10, 0x96, 0x01, 0x0a, 1, 0x78, 0x1a, 2, 0, 0]))).toBe('x')
  const long = 'x'.repeat(300)
  expect(decodeHealthRequest(encodeHealthRequest(long))).toBe(long)
  expect(encodeHealthResponse('SERVING')).toEqual(Buffer.from([0x08, 1]))
  expect(encodeHealthResponse('UNKNOWN')).toEqual(Buffer.alloc(0))
  expect(decodeHealthResponse(Buffer.from([0x08, 3]))).toBe('SERVICE_UNKNOWN')
  expect(() => decodeHealthRequest(Buffer.from([0x0a, 5, 1]))).toThrow(/truncated/)
})

test('checkHealth on a dead address is UNAVAILABLE', async () => {
  const server = await serve(Demo, unusedDemo, { logger: recordingLogger() })
  await server.shutdown({ graceMs: 100 })
  const err = await checkHealth(server.address, { timeoutMs: 2000 }).catch((e: unknown) => e)
  expect((err as RpcError).code).toMatch(/UNAVAILABLE|DEADLINE_EXCEEDED/)
})
