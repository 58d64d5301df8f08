import { once } from 'node:events'
import {
  connect as netConnect,
  createServer as createNetServer,
  type AddressInfo,
  type Server as NetServer,
  type Socket,
} from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { afterEach, expect, test } from 'vitest'
import { connect } from './client.js'
import type { RpcError } from './errors.js'
import { serve } from './server.js'
import { Demo, recordingLogger, unusedDemo } from './test-helpers.js'
import { openTunnel, tunnelService, TunnelService, type Tunnel } from './tunnel.js'

const cleanup: (() => unknown)[] = []
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c()
})

async function target(onConnection: (sock: Socket) => void): Promise<number> {
  const server: NetServer = createNetServer(onConnection)
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  cleanup.push(() => new Promise((r) => server.close(r)))
  return (server.address() as AddressInfo).port
}

async function tunnelTo(
  port: number,
): Promise<{ tunnel: Tunnel; address: string; log: ReturnType<typeof recordingLogger> }> {
  const log = recordingLogger()
  const server = await serve(Demo, unusedDemo, {
    logger: log,
    services: [tunnelService({ allow: [`127.0.0.1:${port}`], logger: log })],
  })
  cleanup.push(() => server.shutdown({ graceMs: 100 }))
  const tunnel = await openTunnel({ via: server.address, to: `127.0.0.1:${port}`, listen: 0, logger: log })
  cleanup.push(() => tunnel.close())
  return { tunnel, address: server.address, log }
}

/** Byte i of a test stream: a pattern that shows reordered, lost or repeated chunks. */
const patterned = (n: number) => {
  const b = Buffer.alloc(n)
  for (let i = 0; i < n; i += 4) b.writeUInt32LE(i >>> 2, i)
  return b
}

/**
 * Writes `payload` into `sock` in 1 MiB blocks while the socket takes them, then ends it.
 * `written` stops growing once the other side pushes back; `sent` turns true when all of it is out.
 */
function pump(sock: Socket, payload: Buffer): { readonly written: number; readonly sent: boolean } {
  const state = { written: 0, sent: false }
  let off = 0
  const more = () => {
    while (off < payload.length) {
      const block = payload.subarray(off, off + (1 << 20))
      off += block.length
      if (!sock.write(block, () => (state.written += block.length))) return void sock.once('drain', more)
    }
    sock.end(() => (state.sent = true))
  }
  more()
  return state
}

test('a reader that stops reading holds the target back, and then gets every byte in order', async () => {
  const total = 48 * 1024 * 1024
  const payload = patterned(total)
  let progress = { written: 0, sent: false }
  const port = await target((sock) => {
    progress = pump(sock, payload)
  })
  const { tunnel } = await tunnelTo(port)
  const sock = netConnect({ host: '127.0.0.1', port: tunnel.port })
  await once(sock, 'connect')
  // Nobody reads the local socket for a while: the tunnel must stop the target, not buffer 48 MiB.
  await sleep(400)
  expect(progress.sent).toBe(false)
  expect(progress.written).toBeLessThan(total)
  const parts: Buffer[] = []
  sock.on('data', (d: Buffer) => parts.push(d))
  await once(sock, 'end')
  const got = Buffer.concat(parts)
  expect(got.length).toBe(total)
  expect(got.equals(payload)).toBe(true)
})

test('a target that stops reading holds the local writer back, and then gets every byte in order', async () => {
  const total = 48 * 1024 * 1024
  const payload = patterned(total)
  const parts: Buffer[] = []
  let targetSock: Socket | undefined
  let received: (all: Buffer) => void = () => {}
  const got = new Promise<Buffer>((resolve) => (received = resolve))
  const port = await target((sock) => {
    // The target does not read until told to.
    targetSock = sock
    sock.pause()
    sock.on('data', (d: Buffer) => parts.push(d))
    sock.on('end', () => received(Buffer.concat(parts)))
  })
  const { tunnel } = await tunnelTo(port)
  const sock = netConnect({ host: '127.0.0.1', port: tunnel.port })
  const progress = pump(sock, payload)
  await expect.poll(() => targetSock).toBeDefined()
  await sleep(400)
  expect(progress.sent).toBe(false)
  expect(progress.written).toBeLessThan(total)
  targetSock!.resume()
  const all = await got
  expect(all.length).toBe(total)
  expect(all.equals(payload)).toBe(true)
})

test('resetting the local connection closes the target connection', async () => {
  const received: Buffer[] = []
  let targetSock: Socket | undefined
  const port = await target((sock) => {
    targetSock = sock
    sock.on('data', (d: Buffer) => received.push(d))
    sock.on('error', () => {})
  })
  const { tunnel } = await tunnelTo(port)
  const local = netConnect({ host: '127.0.0.1', port: tunnel.port })
  local.write('hello')
  await expect.poll(() => Buffer.concat(received).toString()).toBe('hello')
  // The target's socket ends its own side when its input ends, then closes.
  const closed = once(targetSock!, 'close')
  local.resetAndDestroy()
  await closed
  expect(targetSock!.readableEnded).toBe(true)
})

test(
  'a target that resets its connection fails the call with ' + 'UNAVAILABLE and closes the local connection',
  async () => {
    const port = await target((sock) => {
      sock.once('data', () => sock.resetAndDestroy())
    })
    const { tunnel, address, log } = await tunnelTo(port)
    // Through the typed client: the status says what happened.
    const client = connect(TunnelService, address, { logger: log })
    cleanup.push(() => client.close())
    const err = await (async () => {
      try {
        for await (const _ of client.open([Buffer.from('ping')], {
          metadata: { 'ducky-tunnel-to': `127.0.0.1:${port}` },
        }));
      } catch (e) {
        return e as RpcError
      }
    })()
    expect(err?.code).toBe('UNAVAILABLE')
    expect(err?.details).toMatch(/ECONNRESET/)
    // Through the tunnel: the local connection closes, and the failure is logged.
    const local = netConnect({ host: '127.0.0.1', port: tunnel.port })
    local.on('error', () => {})
    local.write('ping')
    await once(local, 'close')
    await expect
      .poll(() =>
        log.lines.some((l) => l.msg === 'tunnel connection failed' && (l.obj.err as RpcError).code === 'UNAVAILABLE'),
      )
      .toBe(true)
  },
)
