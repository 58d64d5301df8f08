import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { Client as GrpcClient, credentials, Metadata } from '@grpc/grpc-js'
import { afterEach, expect, test } from 'vitest'
import { LimitedFrames } from './call-gate.js'
import { connect } from './client.js'
import { fromServiceError, RpcError } from './errors.js'
import { checkHealth } from './health-check.js'
import { serve } from './server.js'
import { Bulk, bulkImpl, Demo, MiB, recordingLogger, unusedDemo } from './test-helpers.js'
import { encodeMessage } from './wire.js'

const FIXTURE = join(import.meta.dirname, 'fixtures', 'bulk-server.ts')
const TOKEN = 'bulk-token-5d1e'
const cleanup: (() => unknown)[] = []
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c()
})

type Memory = { maxRssBytes: number; rssBytes: number }

/** Starts `fixtures/bulk-server.ts` in a child process; `memory()` asks it for its resident memory. */
async function childServer(auth: 'token' | 'authorize'): Promise<{ address: string; memory(): Promise<Memory> }> {
  const child = spawn(process.execPath, ['--import', 'tsx', FIXTURE], {
    env: { ...process.env, DUCKY_TEST_TOKEN: TOKEN, DUCKY_TEST_AUTH: auth },
    stdio: ['pipe', 'pipe', 'inherit'],
  })
  const exited = once(child, 'exit')
  cleanup.push(async () => {
    child.stdin.end()
    if (child.exitCode === null) await exited
  })
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]()
  const next = async () =>
    JSON.parse(((await lines.next()).value as string | undefined) ?? '{}') as Record<string, unknown>
  const { address } = (await next()) as { address: string }
  return {
    address,
    memory: async () => {
      child.stdin.write('\n')
      return (await next()) as Memory
    },
  }
}

/** Sends one already encoded message `n` times at once over a raw grpc-js channel; resolves with each call's error (or
 * response). */
async function sendConcurrently(
  address: string,
  method: string,
  message: Buffer,
  n: number,
  token?: string,
): Promise<unknown[]> {
  const raw = new GrpcClient(address, credentials.createInsecure(), {
    'grpc.max_send_message_length': -1,
    'grpc.max_receive_message_length': -1,
  })
  try {
    const md = new Metadata()
    if (token !== undefined) md.set('authorization', `Bearer ${token}`)
    const same = (b: Buffer) => b
    return await Promise.all(
      Array.from(
        { length: n },
        () =>
          new Promise((resolve) =>
            raw.makeUnaryRequest(method, same, same, message, md, { deadline: Date.now() + 110_000 }, (err, res) =>
              resolve(err ? fromServiceError(err, method) : res),
            ),
          ),
      ),
    )
  } finally {
    raw.close()
  }
}

/** A warm server (one small call served) and its peak memory before the calls under test. */
async function warmChildServer(auth: 'token' | 'authorize' = 'token') {
  const server = await childServer(auth)
  const client = connect(Bulk, server.address, { token: TOKEN, logger: recordingLogger() })
  expect(await client.note({ data: new Uint8Array(1000) })).toEqual({ bytes: 1000 })
  client.close()
  return { ...server, before: await server.memory() }
}

const huge = () => encodeMessage({ data: new Uint8Array(200 * MiB) })

test('four unauthenticated 200 MiB requests are refused before their ' +
  'bodies are read: the server grows by < 50 MiB', { timeout: 120_000 }, async () => {
  const server = await warmChildServer()
  // `upload` takes 256 MiB from a caller with the token: only the token check can stop these early.
  const results = await sendConcurrently(server.address, '/ducky.test.Bulk/upload', huge(), 4)
  for (const r of results) expect((r as RpcError).code).toBe('UNAUTHENTICATED')
  const after = await server.memory()
  const grewMiB = (after.maxRssBytes - server.before.maxRssBytes) / MiB
  console.log(
    `server peak RSS ${(server.before.maxRssBytes / MiB).toFixed(0)} ` +
      `→ ${(after.maxRssBytes / MiB).toFixed(0)} MiB (+` +
      `${grewMiB.toFixed(1)} MiB) for four unauthenticated 200 MiB requests`,
  )
  expect(grewMiB).toBeLessThan(50)
})

test('an authorize hook also runs before the request is read: four ' +
  'refused 200 MiB requests grow the server by < 50 MiB', { timeout: 120_000 }, async () => {
  const server = await warmChildServer('authorize')
  const results = await sendConcurrently(server.address, '/ducky.test.Bulk/upload', huge(), 4, 'not-ours')
  const after = await server.memory()
  const grewMiB = (after.maxRssBytes - server.before.maxRssBytes) / MiB
  console.log(
    `server peak RSS ${(server.before.maxRssBytes / MiB).toFixed(0)} ` +
      `→ ${(after.maxRssBytes / MiB).toFixed(0)} MiB (+` +
      `${grewMiB.toFixed(1)} MiB) for four 200 MiB requests refused by authorize`,
  )
  for (const r of results) expect(r).toMatchObject({ code: 'UNAUTHENTICATED', details: 'not one of our tokens' })
  expect(grewMiB).toBeLessThan(50)
})

test('four authenticated 200 MiB requests to a method with the ' +
  'default limit are RESOURCE_EXHAUSTED without being read: < 50 MiB growth', { timeout: 120_000 }, async () => {
  const server = await warmChildServer()
  const results = await sendConcurrently(server.address, '/ducky.test.Bulk/note', huge(), 4, TOKEN)
  const after = await server.memory()
  const grewMiB = (after.maxRssBytes - server.before.maxRssBytes) / MiB
  console.log(
    `server peak RSS ${(server.before.maxRssBytes / MiB).toFixed(0)} ` +
      `→ ${(after.maxRssBytes / MiB).toFixed(0)} MiB (+` +
      `${grewMiB.toFixed(1)} MiB) for four authenticated 200 MiB ` +
      `requests over the limit`,
  )
  for (const r of results) {
    expect(r).toBeInstanceOf(RpcError)
    expect((r as RpcError).code).toBe('RESOURCE_EXHAUSTED')
    expect((r as RpcError).details).toMatch(/\/ducky\.test\.Bulk\/note/)
    expect((r as RpcError).details).toMatch(/limit of 4194304 bytes \(4 MiB\)/)
  }
  expect(grewMiB).toBeLessThan(50)
})

async function bulkServer() {
  const log = recordingLogger()
  const server = await serve(Bulk, bulkImpl, { token: TOKEN, logger: log })
  cleanup.push(() => server.shutdown({ graceMs: 100 }))
  const client = connect(Bulk, server.address, { token: TOKEN, logger: recordingLogger() })
  cleanup.push(() => client.close())
  return { server, client, log }
}

test(
  'an authenticated request over its method limit is ' +
    'RESOURCE_EXHAUSTED naming the method and the limit, and the ' +
    'server stays healthy',
  async () => {
    const { server, client, log } = await bulkServer()
    const err = (await client.note({ data: new Uint8Array(5 * MiB) }).catch((e: unknown) => e)) as RpcError
    expect(err).toBeInstanceOf(RpcError)
    expect(err.code).toBe('RESOURCE_EXHAUSTED')
    expect(err.details).toMatch(
      /request to \/ducky\.test\.Bulk\/note of \d+ bytes is over the limit of 4194304 bytes \(4 MiB\)/,
    )
    expect(err.details).toMatch(/maxRequestBytes/)
    expect(log.lines.find((l) => l.msg === 'refused call: request over the size limit')?.obj).toMatchObject({
      method: '/ducky.test.Bulk/note',
      limit: 4 * MiB,
    })
    // Just under the limit still passes, and so does everything after the refusal.
    expect(await client.note({ data: new Uint8Array(4 * MiB - 1024) })).toEqual({ bytes: 4 * MiB - 1024 })
    expect(await checkHealth(server.address)).toBe('SERVING')
  },
)

test('a method that declares maxRequestBytes accepts a request over the default limit', async () => {
  const { client } = await bulkServer()
  expect(await client.upload({ data: new Uint8Array(32 * MiB) })).toEqual({ bytes: 32 * MiB })
})

test(
  'a response over its method limit is RESOURCE_EXHAUSTED naming ' +
    'the method; a declared maxResponseBytes lets a large one through',
  async () => {
    const { client, log } = await bulkServer()
    const err = (await client.peek({ bytes: 5 * MiB }).catch((e: unknown) => e)) as RpcError
    expect(err).toBeInstanceOf(RpcError)
    expect(err.code).toBe('RESOURCE_EXHAUSTED')
    expect(err.details).toMatch(
      /response of \/ducky\.test\.Bulk\/peek of \d+ bytes is over the limit of 4194304 bytes \(4 MiB\)/,
    )
    expect(log.lines.find((l) => l.msg === 'refused response: over the size limit')?.obj).toMatchObject({
      method: '/ducky.test.Bulk/peek',
    })
    expect((await client.download({ bytes: 32 * MiB })).data.length).toBe(32 * MiB)
    expect((await client.peek({ bytes: 1024 })).data.length).toBe(1024)
  },
)

test(
  'the frame reader gives whole messages however the bytes are ' +
    'split, and refuses one over the limit from its prefix alone',
  () => {
    const frame = (body: string) => {
      const b = Buffer.from(body)
      const prefix = Buffer.alloc(5)
      prefix.writeUInt32BE(b.length, 1)
      return Buffer.concat([prefix, b])
    }
    const wire = Buffer.concat([frame('first'), frame(''), frame('x'.repeat(100))])
    for (const cut of [1, 3, 5, 7, 12, wire.length]) {
      const reader = new LimitedFrames(100, { tooLarge: (n) => new Error(`too large: ${n}`) })
      const out: Buffer[] = []
      for (let at = 0; at < wire.length; at += cut) out.push(...reader.write(wire.subarray(at, at + cut)))
      expect(out.map((m) => m.subarray(5).toString())).toEqual(['first', '', 'x'.repeat(100)])
      expect(out.every((m) => m.readUInt32BE(1) === m.length - 5)).toBe(true)
    }
    const reader = new LimitedFrames(100, { tooLarge: (n) => new Error(`too large: ${n}`) })
    // Only the prefix of a message one byte over the limit: refused before any of its body comes.
    expect(() => reader.write(frame('x'.repeat(101)).subarray(0, 5))).toThrow('too large: 101')
  },
)

test(
  'a streamed response over its limit ends the stream with ' +
    'RESOURCE_EXHAUSTED, and a handler still yielding sees its ' +
    'signal abort',
  async () => {
    let aborted: Promise<void> | undefined
    const server = await serve(
      Demo,
      {
        ...unusedDemo,
        chunks: async function* ({ n, floats }, ctx) {
          aborted = new Promise((resolve) => ctx.signal.addEventListener('abort', () => resolve()))
          for (let i = 0; i < n && !ctx.signal.aborted; i++) yield { chunk: new Float32Array(i === 0 ? 16 : floats) }
        },
      },
      { logger: recordingLogger() },
    )
    cleanup.push(() => server.shutdown({ graceMs: 100 }))
    const client = connect(Demo, server.address, { logger: recordingLogger() })
    cleanup.push(() => client.close())
    const got: number[] = []
    const err = await (async () => {
      // 4.2 MB chunks after the first: each over the 4 MiB default; the handler would yield 100.
      for await (const { chunk } of client.chunks({ n: 100, floats: 1_050_000 })) got.push(chunk.length)
    })().catch((e: unknown) => e)
    expect(got).toEqual([16])
    expect(err).toMatchObject({
      code: 'RESOURCE_EXHAUSTED',
      details: expect.stringMatching(
        /response of \/ducky\.test\.Demo\/chunks of \d+ bytes is over the limit of 4194304 bytes/,
      ),
    })
    await aborted
  },
)
