/**
 * @module The address an `iris worker` registers by, the one the controller, other hosts and tools reach it
 * at: `--advertise HOST[:PORT]`, checked to be an address of this host that others can reach, or by default
 * the local address of this host's connection to the controller (the interface the controller's packets
 * arrive on), found again at each registration. Never the machine's hostname: on a cluster of hosts many
 * machines share one, and it need not resolve anywhere else.
 */
import { lookup } from 'node:dns/promises'
import { isIP, connect as netConnect } from 'node:net'
import { networkInterfaces } from 'node:os'
import { UsageError } from '@marin/rigging/cli'
import { normalizeAddress } from './grpc-link.js'

/** `host:port`, `[v6]:port`, or a bare host: the parts (the port undefined when absent). */
export function splitHostPort(address: string): { host: string; port?: number } {
  const m = /^\[([^\]]+)\](?::(\d+))?$/.exec(address) ?? /^([^:]*)(?::(\d+))?$/.exec(address)
  if (!m) return { host: address }
  return { host: m[1]!, ...(m[2] !== undefined ? { port: Number(m[2]) } : {}) }
}

const unmapped = (a: string) => a.replace(/^::ffff:(\d+\.\d+\.\d+\.\d+)$/, '$1')
const isLoopback = (a: string) => /^127\./.test(a) || a === '::1'
const bracketed = (h: string) => (h.includes(':') ? `[${h}]` : h)

/** This host's interface addresses (IPv4 and IPv6, loopback included). */
function localAddresses(): string[] {
  return Object.values(networkInterfaces())
    .flat()
    .map((i) => i?.address)
    .filter((a): a is string => a !== undefined)
}

/**
 * The local address of a TCP connection to the controller: the address of the interface its route leaves by,
 * which is where the controller sees this worker. Rejects, naming the controller, when it cannot be reached.
 */
export function localAddressToward(controller: string, timeoutMs = 5000): Promise<string> {
  const { host, port } = splitHostPort(normalizeAddress(controller))
  if (port === undefined || host === '')
    return Promise.reject(new UsageError(`worker: --controller ${controller} is not HOST:PORT`))
  return new Promise((resolve, reject) => {
    const s = netConnect({ host, port })
    const timer = setTimeout(() => {
      s.destroy()
      reject(new Error(`controller ${controller} did not accept a connection within ${timeoutMs} ms`))
    }, timeoutMs)
    s.once('connect', () => {
      clearTimeout(timer)
      const local = s.localAddress
      s.destroy()
      if (local) resolve(unmapped(local))
      else reject(new Error(`the connection to controller ${controller} has no local address`))
    })
    s.once('error', (err) => {
      clearTimeout(timer)
      reject(new Error(`cannot connect to controller ${controller}: ${err.message}`, { cause: err }))
    })
  })
}

/**
 * Checks `--advertise HOST[:PORT]`: HOST (an address, or a name resolving to one) must be an address of this host,
 * not the unspecified address, and not loopback unless the controller is on loopback too (else no other host
 * could use it). Returns the address to register, with HOST as resolved when it was a name.
 */
export async function checkAdvertise(advertise: string, controller: string): Promise<string> {
  const { host, port } = splitHostPort(advertise.trim())
  const fix =
    'pass an address of this host that the controller and the other hosts reach it by, or leave --advertise out ' +
    'to use the local address of the connection to the controller'
  if (host === '' || (port !== undefined && (port < 1 || port > 65_535)))
    throw new UsageError(`worker: --advertise ${advertise} is not HOST[:PORT] (a port 1..65535); ${fix}`)
  let addresses: string[]
  try {
    addresses = isIP(host) ? [host] : (await lookup(host, { all: true })).map((a) => a.address)
  } catch (err) {
    throw new UsageError(
      `worker: --advertise ${advertise}: ${host} does not resolve (${(err as NodeJS.ErrnoException).code}); ${fix}`,
    )
  }
  const mine = new Set(localAddresses())
  const own = addresses.map(unmapped).filter((a) => mine.has(a))
  if (addresses.some((a) => a === '0.0.0.0' || a === '::'))
    throw new UsageError(`worker: --advertise ${advertise} is the unspecified address, which no one can reach; ${fix}`)
  if (own.length === 0)
    throw new UsageError(
      `worker: --advertise ${advertise} is not an address of this host` +
        `${isIP(host) ? '' : ` (${host} is ${addresses.join(', ')})`}; its addresses are ` +
        `${[...mine].join(', ')}; ${fix}`,
    )
  const ctlHost = splitHostPort(normalizeAddress(controller)).host
  const reachable = own.find((a) => !isLoopback(a))
  if (reachable === undefined && !isLoopback(ctlHost) && ctlHost !== 'localhost')
    throw new UsageError(
      `worker: --advertise ${advertise} is a loopback address, which the controller at ${controller} and the ` +
        `other hosts cannot reach; ${fix}`,
    )
  const chosen = reachable ?? own[0]!
  const why = await unreachableFrom(chosen, controller)
  if (why !== undefined)
    throw new UsageError(
      `worker: --advertise ${advertise}: the controller at ${controller} is unreachable from ` +
        `${chosen} (${why}); ${fix}`,
    )
  return `${bracketed(chosen)}${port !== undefined ? `:${port}` : ''}`
}

/** Why no route leads from `local` to the controller (a connection bound to it fails so), or undefined: a refused or
 * unanswered connection says nothing against the address (the controller may not be up yet). */
function unreachableFrom(local: string, controller: string, timeoutMs = 3000): Promise<string | undefined> {
  const { host, port } = splitHostPort(normalizeAddress(controller))
  if (port === undefined) return Promise.resolve(undefined)
  return new Promise((resolve) => {
    const s = netConnect({ host, port, localAddress: local })
    const done = (why: string | undefined) => {
      clearTimeout(timer)
      s.destroy()
      resolve(why)
    }
    const timer = setTimeout(() => done(undefined), timeoutMs)
    s.once('connect', () => done(undefined))
    s.once('error', (err: NodeJS.ErrnoException) =>
      done(['ENETUNREACH', 'EHOSTUNREACH', 'EADDRNOTAVAIL', 'EINVAL'].includes(err.code ?? '') ? err.code : undefined),
    )
  })
}
