/**
 * The delaying TCP relay: bytes through it intact each way, half-closes passed on, a target that refuses resets
 * the client, and a round trip takes at least twice the delay. Across test hosts (`delayLink`): a connection from
 * one host to the other's address passes the relays (it takes the delay, the server sees the relay's address),
 * a third host's does not, and once the link is closed the two reach each other directly again.
 */
import { createHash, randomBytes } from 'node:crypto'
import net from 'node:net'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { delayLink, relayAddress, relayPorts } from './net-hosts-delay.js'
import { makeNetHosts, type NetHost, type NetHosts, netHostsSupport } from './net-hosts.js'
import { startRelay } from './net-relay.js'

const why = netHostsSupport()
if (why !== undefined) console.warn(`delayed links skipped: ${why}`)

const listen = (srv: net.Server) =>
  new Promise<number>((r) => srv.listen(0, '127.0.0.1', () => r((srv.address() as net.AddressInfo).port)))
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex')
/** Connects, writes `data`, half-closes; resolves with everything read until the other side ends. */
const exchange = (port: number, data: Buffer) =>
  new Promise<Buffer>((resolve, reject) => {
    const s = net.connect({ host: '127.0.0.1', port }, () => s.end(data))
    const got: Buffer[] = []
    s.on('data', (c: Buffer) => got.push(c))
    s.on('end', () => resolve(Buffer.concat(got)))
    s.on('error', reject)
  })

describe('startRelay', () => {
  test('bytes pass intact both ways and half-closes pass on, each way after the delay', async () => {
    // The server answers once the client has finished sending: the digest of all it got.
    const server = net.createServer((s) => {
      const got: Buffer[] = []
      s.on('data', (c: Buffer) => got.push(c))
      s.on('end', () => s.end(sha(Buffer.concat(got))))
    })
    const port = await listen(server)
    const relay = await startRelay({
      host: '127.0.0.1',
      ports: [0],
      target: () => ({ host: '127.0.0.1', port }),
      delayMs: 25,
    })
    try {
      const data = randomBytes(8 * 2 ** 20)
      const t0 = performance.now()
      const answer = await exchange(relay.ports[0]!, data)
      // The last byte goes one way and the answer comes back: two delays at the least.
      expect(performance.now() - t0).toBeGreaterThanOrEqual(50 - 1)
      expect(answer.toString()).toBe(sha(data))
      expect(relay.accepted()).toBe(1)
    } finally {
      await relay.close()
      server.close()
    }
  })

  test('with no delay and a small buffer bound, a large echo still arrives whole', async () => {
    const server = net.createServer((s) => s.pipe(s))
    const port = await listen(server)
    const relay = await startRelay({
      host: '127.0.0.1',
      ports: [0],
      target: () => ({ host: '127.0.0.1', port }),
      delayMs: 0,
      maxBufferedBytes: 64 * 1024,
    })
    try {
      const data = randomBytes(4 * 2 ** 20)
      expect(sha(await exchange(relay.ports[0]!, data))).toBe(sha(data))
    } finally {
      await relay.close()
      server.close()
    }
  })

  test('a target that refuses resets the client; a bad delay or no port is refused', async () => {
    const closed = net.createServer()
    const port = await listen(closed)
    await new Promise((r) => closed.close(r))
    const relay = await startRelay({
      host: '127.0.0.1',
      ports: [0],
      target: () => ({ host: '127.0.0.1', port }),
      delayMs: 1,
    })
    try {
      await expect(exchange(relay.ports[0]!, Buffer.from('hello'))).rejects.toThrow(/ECONNRESET/)
    } finally {
      await relay.close()
    }
    const target = () => ({ host: '127.0.0.1', port })
    await expect(startRelay({ host: '127.0.0.1', ports: [0], target, delayMs: -1 })).rejects.toThrow(
      /delayMs must be a number of milliseconds ≥ 0, not -1/,
    )
    await expect(startRelay({ host: '127.0.0.1', ports: [], target, delayMs: 1 })).rejects.toThrow(/at least one port/)
  })
})

// A server on 0.0.0.0 at a port of the host's own range that answers each line with the peer's address; a client
// that connects to <address>:<port>, sends a line, prints the answer and the round trip's milliseconds.
const SERVER = `
const s = require('node:net').createServer((c) => c.on('data', () => c.write(c.remoteAddress + '\\n')))
s.listen(0, '0.0.0.0', () => console.log(JSON.stringify({ port: s.address().port })))
`
const CLIENT = `
const [host, port] = process.argv.slice(1)
const s = require('node:net').connect({ host, port: Number(port) }, () => { t = performance.now(); s.write('hi\\n') })
let t = 0
s.setEncoding('utf8')
s.on('data', (d) => { console.log(JSON.stringify({ peer: d.trim(), ms: performance.now() - t })); process.exit(0) })
s.on('error', (e) => { console.log(JSON.stringify({ error: e.code })); process.exit(2) })
`

describe.skipIf(why !== undefined)(`delayLink${why ? ` (skipped: ${why})` : ''}`, () => {
  let net3: NetHosts | undefined
  let a: NetHost
  let b: NetHost
  let c: NetHost
  beforeAll(() => {
    net3 = makeNetHosts(3)
    ;[a, b, c] = net3.hosts as [NetHost, NetHost, NetHost]
  })
  afterAll(() => net3?.close())
  const ask = async (from: NetHost, to: NetHost, port: number) => {
    const r = await from.exec(process.execPath, ['-e', CLIENT, to.address, String(port)], { timeoutMs: 10_000 })
    return JSON.parse(r.stdout.trim().split('\n').at(-1) ?? '{}') as { peer?: string; ms?: number; error?: string }
  }

  test('connections between the hosts take the delay through the relays; others and a closed link do not', async () => {
    const link = await delayLink(b, c, 20)
    try {
      // Started after the link: its port is in c's own range.
      const server = c.spawn(process.execPath, ['-e', SERVER])
      const { port } = JSON.parse((await server.waitFor(/^\{"port".*$/m, 10_000))[0]) as { port: number }
      const [lo, hi] = relayPorts(c)
      expect(port).toBeGreaterThanOrEqual(lo)
      expect(port).toBeLessThanOrEqual(hi)
      const viaRelay = await ask(b, c, port)
      // The server is reached from b's relay, at b's second address; the round trip holds two delays.
      expect(viaRelay.peer).toBe(relayAddress(b))
      expect(viaRelay.ms).toBeGreaterThanOrEqual(40 - 1)
      expect(link.accepted()).toBe(1)
      // Host a is not on the link: it reaches c directly.
      expect((await ask(a, c, port)).peer).toBe(a.address)
      await link.close()
      expect((await ask(b, c, port)).peer).toBe(b.address)
      server.kill()
    } finally {
      await link.close()
    }
  }, 60_000)

  test('a link of a host with itself or a negative delay is refused', async () => {
    await expect(delayLink(b, b, 1)).rejects.toThrow(/joins two hosts/)
    await expect(delayLink(b, c, Number.NaN)).rejects.toThrow(/delayMs must be a number/)
  })
})
