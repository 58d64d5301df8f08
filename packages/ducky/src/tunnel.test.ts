import { createServer as createHttpServer, get as httpGet, type Server as HttpServer } from 'node:http'
import {
  connect as netConnect,
  createServer as createNetServer,
  type AddressInfo,
  type Server as NetServer,
} from 'node:net'
import { afterEach, expect, test } from 'vitest'
import { connect } from './client.js'
import { RpcError } from './errors.js'
import { serve, type DuckyServer } from './server.js'
import { Demo, recordingLogger, unusedDemo } from './test-helpers.js'
import { openTunnel, parseHostPort, tunnelService, TunnelService, type Tunnel } from './tunnel.js'

const cleanup: (() => unknown)[] = []
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c()
})

async function listen<T extends HttpServer | NetServer>(server: T): Promise<number> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  cleanup.push(() => new Promise((r) => server.close(r)))
  return (server.address() as AddressInfo).port
}

async function tunnelServer(
  allow: string[],
  opts: { token?: string } = {},
): Promise<{ server: DuckyServer; log: ReturnType<typeof recordingLogger> }> {
  const log = recordingLogger()
  const server = await serve(Demo, unusedDemo, {
    logger: log,
    services: [tunnelService({ allow, logger: log })],
    ...opts,
  })
  cleanup.push(() => server.shutdown({ graceMs: 100 }))
  return { server, log }
}

async function open(opts: Parameters<typeof openTunnel>[0]): Promise<Tunnel> {
  const t = await openTunnel(opts)
  cleanup.push(() => t.close())
  return t
}

function fetchText(port: number, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    httpGet({ host: '127.0.0.1', port, path, agent: false }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (c: string) => (body += c))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }))
    }).on('error', reject)
  })
}

test('a tunnel carries an HTTP request to a local HTTP server', async () => {
  const http = createHttpServer((req, res) => res.end(`hello from ${req.url}`))
  const httpPort = await listen(http)
  const { server, log } = await tunnelServer([`127.0.0.1:${httpPort}`], { token: 's3cret' })
  const t = await open({ via: server.address, to: `127.0.0.1:${httpPort}`, listen: 0, token: 's3cret', logger: log })
  expect(await fetchText(t.port, '/dashboard')).toEqual({ status: 200, body: 'hello from /dashboard' })
  // Several connections, one after another and at once.
  const many = await Promise.all([1, 2, 3].map((i) => fetchText(t.port, `/p${i}`)))
  expect(many.map((r) => r.body)).toEqual(['hello from /p1', 'hello from /p2', 'hello from /p3'])
})

test('half-close: the client shuts its write side and still reads the whole answer', async () => {
  // The target answers only once its input ended: bytes, then the reply, then its own end.
  const echo = createNetServer({ allowHalfOpen: true }, (sock) => {
    const parts: Buffer[] = []
    sock.on('data', (d: Buffer) => parts.push(d))
    sock.on('end', () => sock.end(Buffer.concat(parts).reverse()))
  })
  const echoPort = await listen(echo)
  const { server, log } = await tunnelServer([`127.0.0.1:${echoPort}`])
  const t = await open({ via: server.address, to: `127.0.0.1:${echoPort}`, listen: 0, logger: log })
  const payload = Buffer.alloc(3 * 1024 * 1024)
  for (let i = 0; i < payload.length; i++) payload[i] = (i * 7) & 0xff
  const got = await new Promise<Buffer>((resolve, reject) => {
    const sock = netConnect({ host: '127.0.0.1', port: t.port, allowHalfOpen: true })
    const parts: Buffer[] = []
    sock.on('data', (d: Buffer) => parts.push(d))
    sock.on('end', () => resolve(Buffer.concat(parts)))
    sock.on('error', reject)
    sock.end(payload)
  })
  expect(got.length).toBe(payload.length)
  expect(got.equals(Buffer.from(payload).reverse())).toBe(true)
})

test('the target closing first closes the local connection', async () => {
  const closer = createNetServer((sock) => sock.end('bye'))
  const port = await listen(closer)
  const { server, log } = await tunnelServer([`127.0.0.1:${port}`])
  const t = await open({ via: server.address, to: `127.0.0.1:${port}`, listen: 0, logger: log })
  const text = await new Promise<string>((resolve, reject) => {
    const sock = netConnect({ host: '127.0.0.1', port: t.port })
    let s = ''
    sock.on('data', (d: Buffer) => (s += d.toString()))
    sock.on('close', () => resolve(s))
    sock.on('error', reject)
  })
  expect(text).toBe('bye')
})

test('a tunnel to a target outside the allow-list is refused with PERMISSION_DENIED', async () => {
  const http = createHttpServer((_req, res) => res.end('secret'))
  const httpPort = await listen(http)
  const { server, log } = await tunnelServer(['127.0.0.1:1'])
  const err = await openTunnel({ via: server.address, to: `127.0.0.1:${httpPort}`, listen: 0, logger: log }).catch(
    (e: unknown) => e,
  )
  expect(err).toBeInstanceOf(RpcError)
  expect((err as RpcError).code).toBe('PERMISSION_DENIED')
  expect((err as RpcError).details).toContain(`127.0.0.1:${httpPort} is not allowed`)
  // The raw stream is refused as well, before any byte reaches the target.
  const client = connect(TunnelService, server.address, { logger: log })
  cleanup.push(() => client.close())
  const raw = await (async () => {
    try {
      for await (const _ of client.open([Buffer.from('GET / HTTP/1.0\r\n\r\n')], {
        metadata: { 'ducky-tunnel-to': `127.0.0.1:${httpPort}` },
      }))
        return 'answered'
    } catch (e) {
      return e as RpcError
    }
    return 'ended'
  })()
  expect((raw as RpcError).code).toBe('PERMISSION_DENIED')
  expect(log.lines.some((l) => l.msg === 'refused tunnel to a target outside the allow-list')).toBe(true)
})

test('a tunnel needs the server token', async () => {
  const { server, log } = await tunnelServer(['127.0.0.1:9'], { token: 'right' })
  const err = await openTunnel({
    via: server.address,
    to: '127.0.0.1:9',
    listen: 0,
    token: 'wrong',
    logger: log,
  }).catch((e: unknown) => e)
  expect((err as RpcError).code).toBe('UNAUTHENTICATED')
})

test('an allowed target that does not listen is UNAVAILABLE on the connection', async () => {
  const probe = createNetServer()
  const deadPort = await listen(probe)
  await new Promise((r) => probe.close(r))
  const { server, log } = await tunnelServer([`127.0.0.1:${deadPort}`])
  const client = connect(TunnelService, server.address, { logger: log })
  cleanup.push(() => client.close())
  const err = await (async () => {
    try {
      for await (const _ of client.open([], { metadata: { 'ducky-tunnel-to': `127.0.0.1:${deadPort}` } }));
    } catch (e) {
      return e as RpcError
    }
  })()
  expect(err?.code).toBe('UNAVAILABLE')
  expect(err?.details).toMatch(/ECONNREFUSED/)
})

test('host:port parsing names the field on bad input', () => {
  expect(parseHostPort('LocalHost:80', 'to').key).toBe('localhost:80')
  expect(parseHostPort('[::1]:8080', 'to')).toEqual({ host: '::1', port: 8080, key: '[::1]:8080' })
  expect(() => parseHostPort('nope', 'to')).toThrow(/to: "nope" is not host:port/)
  expect(() => parseHostPort('h:70000', 'allow[0]')).toThrow(/allow\[0\]/)
})
