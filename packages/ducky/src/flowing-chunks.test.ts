import { once } from 'node:events'
import { createConnection, createServer, type AddressInfo, type Server, type Socket } from 'node:net'
import { Readable } from 'node:stream'
import { afterEach, expect, test } from 'vitest'
import { flowingChunks } from './flowing-chunks.js'

const servers: Server[] = []
afterEach(() => {
  for (const s of servers.splice(0)) s.close()
})

/** A loopback pair: `remote` is the server's end of the connection `local`. */
async function pair(): Promise<{ local: Socket; remote: Socket }> {
  const server = createServer({ allowHalfOpen: true })
  servers.push(server)
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const accepted = once(server, 'connection') as Promise<[Socket]>
  const local = createConnection({
    host: '127.0.0.1',
    port: (server.address() as AddressInfo).port,
    allowHalfOpen: true,
  })
  const [[remote]] = await Promise.all([accepted, once(local, 'connect')])
  return { local, remote }
}

test('yields every byte in order, pausing while the consumer is slow, and ends with the input', async () => {
  const { local, remote } = await pair()
  const data = Buffer.alloc(4 << 20)
  for (let i = 0; i < data.length; i++) data[i] = (i * 31) & 0xff
  remote.end(data)
  const got: Buffer[] = []
  let pausedSeen = false
  for await (const chunk of flowingChunks(local, 2)) {
    got.push(chunk)
    // A slow consumer: the socket must stop reading instead of queueing without bound.
    if (got.length % 8 === 0) {
      await new Promise((r) => setTimeout(r, 2))
      pausedSeen ||= local.isPaused()
    }
  }
  expect(Buffer.concat(got).equals(data)).toBe(true)
  expect(pausedSeen).toBe(true)
  expect(local.destroyed).toBe(false) // the caller owns the socket
  local.destroy()
})

test('a connection reset is an error, not an end of input', async () => {
  const { local, remote } = await pair()
  remote.write('partial')
  const it = flowingChunks(local)
  expect((await it.next()).value?.toString()).toBe('partial')
  remote.resetAndDestroy()
  await expect(it.next()).rejects.toThrow(/ECONNRESET|closed before its end of input/)
  local.destroy()
})

test('a socket destroyed locally ends the iteration with a premature-close error', async () => {
  const { local, remote } = await pair()
  const it = flowingChunks(local)
  const next = it.next()
  local.destroy()
  await expect(next).rejects.toMatchObject({ code: 'ERR_STREAM_PREMATURE_CLOSE' })
  remote.destroy()
})

test('leaving the loop early pauses the socket and leaves it open', async () => {
  const { local, remote } = await pair()
  remote.write('a')
  for await (const chunk of flowingChunks(local)) {
    expect(chunk.toString()).toBe('a')
    break
  }
  expect(local.isPaused()).toBe(true)
  expect(local.destroyed).toBe(false)
  expect(local.listenerCount('data')).toBe(0)
  // The socket is still usable by its owner.
  remote.end('b')
  const rest: Buffer[] = []
  for await (const chunk of flowingChunks(local)) rest.push(chunk)
  expect(Buffer.concat(rest).toString()).toBe('b')
  local.destroy()
})

test('an object-mode stream (as grpc-js calls are) yields its messages, then its error', async () => {
  const stream = new Readable({ objectMode: true, read() {} })
  stream.push({ value: 1 })
  stream.push({ value: 0 })
  setTimeout(() => stream.destroy(Object.assign(new Error('status 14'), { code: 14 })), 5)
  const got: unknown[] = []
  await expect(
    (async () => {
      for await (const m of flowingChunks<{ value: number }>(stream)) got.push(m.value)
    })(),
  ).rejects.toMatchObject({ code: 14 })
  expect(got).toEqual([1, 0])
})
