/**
 * @module A slow link between two test hosts (`net-hosts.ts`) where the kernel has no `netem`: every TCP
 * connection from one host to the other's address passes a relay (`net-relay.ts`) that adds `delayMs` each way.
 *
 * How, with iproute2 alone: each host gets a second address on its link (`10.89.<run>.<i+1>`, the relays' own way
 * through) and a range of ports of its own for the sockets it binds to port 0 (`relayPorts`, the per-namespace
 * `ip_local_port_range`). In host x, y's address is made local (`ip route add local`), so x's connections to it
 * land on x's relay, which listens on y's address at every port of y's range and joins each connection to the same
 * port at y's second address, `delayMs` later each way. Symmetrically in y. Each connection passes one relay, so the
 * one-way delay is `delayMs` in both directions.
 *
 * What it asks of the processes: a server on y that x must reach binds a port of y's range (port 0, after
 * `delayLink` was called once for y) and listens on every interface (`0.0.0.0`), so that the relay reaches it at
 * y's second address; while the link is delayed, x reaches y at no other port. Nothing changes for other hosts.
 */
import { spawnSync } from 'node:child_process'
import { createRequire } from 'node:module'
import { fileURLToPath, pathToFileURL } from 'node:url'
import type { HostProcess, NetHost } from './net-hosts.js'

const RANGE = 150
const FIRST_PORT = 20_000
const MAIN = fileURLToPath(new URL('./net-relay-main.ts', import.meta.url))

function ip(args: readonly string[], okIf?: RegExp): void {
  const r = spawnSync('ip', args, { encoding: 'utf8', timeout: 10_000 })
  const out = `${r.stdout ?? ''}${r.stderr ?? ''}${r.error ? r.error.message : ''}`.trim()
  if (r.status !== 0 && !okIf?.test(out)) throw new Error(`net-hosts: "ip ${args.join(' ')}" failed: ${out}`)
}

/** The host's index on the bridge (the last byte of its address). */
function indexOf(h: NetHost): number {
  const m = /^10\.88\.(\d+)\.(\d+)$/.exec(h.address)
  if (!m) throw new Error(`net-hosts: ${h.name} has address ${h.address}, not one makeNetHosts gave`)
  return Number(m[2])
}

/** The host's second address, the relays' way to it. */
export function relayAddress(h: NetHost): string {
  return h.address.replace(/^10\.88\./, '10.89.')
}

/** The ports host `h` binds its port-0 sockets in once a link of it is delayed: `[first, last]`. */
export function relayPorts(h: NetHost): [number, number] {
  const first = FIRST_PORT + RANGE * (indexOf(h) - 1)
  return [first, first + RANGE - 1]
}

/** Gives `h` its second address and its own port range (idempotent). */
function prepare(h: NetHost): void {
  ip(['-n', h.ns, 'addr', 'add', `${relayAddress(h)}/24`, 'dev', 'eth0'], /File exists|already assigned/)
  const [lo, hi] = relayPorts(h)
  ip(['netns', 'exec', h.ns, 'sh', '-c', `echo "${lo} ${hi}" > /proc/sys/net/ipv4/ip_local_port_range`])
}

export type DelayedLink = {
  readonly delayMs: number
  /** Connections the two relays have carried so far (both ways). */
  accepted(): number
  /** Stops both relays: the hosts reach each other directly again. */
  close(): Promise<void>
}

/**
 * Delays every TCP connection between hosts `x` and `y` by `delayMs` each way (see the module doc) until
 * `close()`; the hosts' cleanup ends the relays too.
 * @example
 * const link = await delayLink(b, c, 10)   // then start the servers of b and c (port 0, on 0.0.0.0)
 * await link.close()
 */
export async function delayLink(x: NetHost, y: NetHost, delayMs: number): Promise<DelayedLink> {
  if (!(Number.isFinite(delayMs) && delayMs >= 0))
    throw new Error(`net-hosts: delayMs must be a number of milliseconds ≥ 0, not ${delayMs}`)
  if (x === y) throw new Error(`net-hosts: a delayed link joins two hosts, not ${x.name} and itself`)
  prepare(x)
  prepare(y)
  const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href
  const relays: HostProcess[] = []
  const routes: [NetHost, NetHost][] = []
  const close = async () => {
    for (const r of relays) r.kill()
    await Promise.all(relays.map((r) => r.exited))
    for (const [from, to] of routes) ip(['-n', from.ns, 'route', 'del', 'local', `${to.address}/32`, 'dev', 'lo'], /./)
  }
  try {
    for (const [from, to] of [
      [x, y],
      [y, x],
    ] as const) {
      const [lo, hi] = relayPorts(to)
      const ports = Array.from({ length: hi - lo + 1 }, (_, i) => lo + i)
      ip(['-n', from.ns, 'route', 'add', 'local', `${to.address}/32`, 'dev', 'lo'])
      routes.push([from, to])
      const config = { host: to.address, ports, targetHost: relayAddress(to), delayMs }
      const relay = from.spawn(process.execPath, ['--import', tsx, MAIN, JSON.stringify(config)])
      relays.push(relay)
      await relay.waitFor(/^\{"relaying".*$/m, 20_000)
    }
  } catch (err) {
    await close()
    throw err
  }
  const accepted = () => relays.reduce((n, r) => n + (r.stdout().match(/^\{"accepted":\d+\}$/gm)?.length ?? 0), 0)
  return { delayMs, accepted, close }
}
