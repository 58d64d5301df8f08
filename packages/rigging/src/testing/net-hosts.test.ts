/**
 * Test hosts as network namespaces: two hosts reach each other by their own addresses over TCP, a cut link
 * stops the traffic and a restored one carries it again, each host has its own folder, and closing leaves no
 * namespace, process or folder behind.
 */
import { existsSync } from 'node:fs'
import { describe, expect, test } from 'vitest'
import { makeNetHosts, netHostNamespaces, netHostsSupport, type NetHost } from './net-hosts.js'

const why = netHostsSupport()
if (why !== undefined) console.warn(`net-hosts tests skipped: ${why}`)

// A TCP echo server on <address>:7000 that prints "listening" once bound.
const SERVER = `
const net = require('node:net')
net.createServer((s) => s.pipe(s)).listen(7000, process.argv[1], () => console.log('listening'))
`
// Connects to <address>:7000, sends "ping", prints what comes back; exits 3 when nothing answers in 1.5 s.
const CLIENT = `
const net = require('node:net')
const s = net.connect({ host: process.argv[1], port: 7000 }, () => s.write('ping'))
s.setEncoding('utf8')
s.on('data', (d) => {
  console.log('got ' + d + ' from ' + s.remoteAddress + ' via ' + s.localAddress)
  process.exit(0)
})
s.on('error', (e) => { console.log('error ' + e.code); process.exit(2) })
setTimeout(() => { console.log('timeout'); process.exit(3) }, 1500)
`

const call = (from: NetHost, to: NetHost) =>
  from.exec(process.execPath, ['-e', CLIENT, to.address], { timeoutMs: 10_000 })

describe.skipIf(why !== undefined)(`test hosts${why ? ` (skipped: ${why})` : ''}`, () => {
  test('two hosts talk TCP by their own addresses; a cut link stops it, a restored one carries it again; close ' +
    'removes every namespace, process and folder', async () => {
    const net = makeNetHosts(2)
    try {
      const [a, b] = net.hosts as [NetHost, NetHost]
      expect(a.address).toBe(`10.88.${net.run}.1`)
      expect(b.address).toBe(`10.88.${net.run}.2`)
      expect(a.dir).not.toBe(b.dir)
      expect(netHostNamespaces(net.run).sort()).toEqual([a.ns, b.ns, `mh${net.run}-sw`].sort())

      // Each host sees only its own address (and loopback).
      const addrs = await a.exec('ip', ['-4', '-o', 'addr'])
      expect(addrs.stdout).toContain(`${a.address}/24`)
      expect(addrs.stdout).not.toContain(b.address)

      const server = a.spawn(process.execPath, ['-e', SERVER, a.address])
      await server.waitFor(/listening/, 10_000)
      const ok = await call(b, a)
      expect(ok.stdout.trim()).toBe(`got ping from ${a.address} via ${b.address}`)

      b.cut()
      const cut = await call(b, a)
      expect(cut.code).not.toBe(0)
      expect(cut.stdout).toMatch(/timeout|error/)

      b.restore()
      let back = await call(b, a)
      // The carrier may take a moment to come back: a bounded number of tries.
      for (let i = 0; i < 10 && back.code !== 0; i++) back = await call(b, a)
      expect(back.stdout.trim()).toBe(`got ping from ${a.address} via ${b.address}`)

      const pid = server.child.pid!
      net.close()
      expect(await server.exited).not.toBe(0)
      expect(() => process.kill(pid, 0)).toThrow()
      expect(netHostNamespaces(net.run)).toEqual([])
      expect(existsSync(a.dir) || existsSync(b.dir)).toBe(false)
    } finally {
      net.close()
    }
  }, 60_000)

  test(
    'a failing test still removes its hosts: cleanup registered with the runner runs once, close after it is ' +
      'a no-op',
    () => {
      let registered: (() => void) | undefined
      const net = makeNetHosts(1, { cleanupWith: (fn) => (registered = fn) })
      expect(netHostNamespaces(net.run)).toHaveLength(2)
      registered!()
      expect(netHostNamespaces(net.run)).toEqual([])
      net.close()
    },
  )

  test('bad host counts are refused, naming the count', () => {
    expect(() => makeNetHosts(0)).toThrow(/1\.\.250, not 0/)
  })
})
