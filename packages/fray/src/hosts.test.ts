/**
 * fray across network hosts: a driver on host A (network namespaces with their own addresses and folders,
 * `@marin/rigging/net-hosts`) and a two-member mesh with one member on host B and one on host C, each actor host
 * started there with `ip netns exec`, listening on and advertising (`FRAY_ADVERTISE_HOST`) its own host's address.
 * The all-reduce over the veth link equals the one-host result bit for bit, and so does it over a slow link (rigging's
 * delaying relay between B and C, `delayLink`); a wrong advertised address is refused
 * naming the address and the variable; a host partitioned mid-collective fails the collective naming the member
 * within `FRAY_PEER_TIMEOUT_MS` (no hang).
 */
import { createHash } from 'node:crypto'
import { createRequire } from 'node:module'
import { resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { delayLink, makeNetHosts, netHostsSupport, type NetHost, type NetHosts } from '@marin/rigging/net-hosts'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { testData } from './fixtures/data.js'
import type { DriverConfig, DriverHost } from './fixtures/hosts-driver.js'
import { peerTimeoutMs } from './collective/peers.js'
import { hostAddresses } from './remote/advertise.js'

const why = netHostsSupport()
if (why !== undefined) console.warn(`fray across hosts skipped: ${why}`)

const TSX = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href
const DRIVER = resolve(import.meta.dirname, 'fixtures/hosts-driver.ts')
const N = 100_003
/** A member silent this long is lost; the partition below must be reported within it plus slack. */
const PEER_TIMEOUT_MS = 2000

type Step = { step: string; [k: string]: unknown }

const digest = (x: Float32Array) =>
  createHash('sha256')
    .update(new Uint8Array(x.buffer, x.byteOffset, x.byteLength))
    .digest('hex')

describe.skipIf(why !== undefined)(`fray across hosts${why ? ` (skipped: ${why})` : ''}`, () => {
  let a: NetHost
  let b: NetHost
  let c: NetHost
  let net: NetHosts | undefined
  afterAll(() => net?.close())
  beforeAll(() => {
    net = makeNetHosts(3)
    ;[a, b, c] = net.hosts as [NetHost, NetHost, NetHost]
  })

  const member = (h: NetHost, extra: Partial<DriverHost> = {}): DriverHost => ({
    ns: h.ns,
    address: h.address,
    env: { FRAY_PEER_TIMEOUT_MS: String(PEER_TIMEOUT_MS) },
    ...extra,
  })
  /** Starts the driver on host A; its steps are read as they come. */
  const drive = (scenario: DriverConfig['scenario'], hosts: DriverHost[]) => {
    const config: DriverConfig = { scenario, driverHost: a.address, hosts, n: N }
    const p = a.spawn(process.execPath, ['--import', TSX, DRIVER, JSON.stringify(config)])
    return {
      p,
      async step(name: string, ms: number): Promise<Step> {
        const m = await p.waitFor(new RegExp(`^\\{"step":"(${name}|error)".*$`, 'm'), ms).catch((e: Error) => {
          throw new Error(`${e.message}; driver stderr: ${p.stderr().slice(-1500)}`)
        })
        const s = JSON.parse(m[0]) as Step
        if (s.step === 'error') throw new Error(`driver failed: ${s.message}; stderr: ${p.stderr().slice(-1500)}`)
        return s
      },
    }
  }

  test('an all-reduce over members on hosts B and C equals the one-host result', async () => {
    const across = drive('allReduce', [member(b), member(c)])
    const got = await across.step('allReduce', 45_000)
    // The one-host result: both members on host A (where they link by Unix socket), and the rank-order float32 sum.
    const here = await drive('allReduce', [member(a), member(a)]).step('allReduce', 45_000)
    const [x, y] = [testData(1000, N, 'random'), testData(1001, N, 'random')]
    const sum = x.slice()
    for (let i = 0; i < N; i++) sum[i]! += y[i]!
    expect(got.digests).toEqual([digest(sum), digest(sum)])
    expect(here.digests).toEqual(got.digests)
    expect(got.head).toEqual(Array.from(sum.subarray(0, 4)))
  }, 100_000)

  test('over a slow link (a relay adding 5 ms each way) the all-reduce is the same, bit for bit', async () => {
    const link = await delayLink(b, c, 5)
    try {
      // Started after the link, listening everywhere: the relays reach each member at its host's second address.
      const everywhere = (h: NetHost) =>
        member(h, { env: { FRAY_PEER_TIMEOUT_MS: String(PEER_TIMEOUT_MS), FRAY_LISTEN_HOST: '0.0.0.0' } })
      const slow = await drive('allReduce', [everywhere(b), everywhere(c)]).step('allReduce', 45_000)
      const [x, y] = [testData(1000, N, 'random'), testData(1001, N, 'random')]
      const sum = x.slice()
      for (let i = 0; i < N; i++) sum[i]! += y[i]!
      expect(slow.digests).toEqual([digest(sum), digest(sum)])
      // Each member dialed the other through its host's relay.
      expect(link.accepted()).toBeGreaterThanOrEqual(2)
    } finally {
      await link.close()
    }
  }, 100_000)

  test('a wrong advertised address is refused, naming the address and the variable', async () => {
    // Host C's member says it is at B's address; the driver's error says so, and what to set instead.
    const wrong = drive('start', [member(b), member(c, { advertise: b.address })])
    const s = await wrong.step('start', 45_000)
    expect(s.ok).toBe(false)
    expect(s.code).toBe('ACTOR_START_FAILED')
    expect(s.message).toContain(`FRAY_ADVERTISE_HOST=${b.address} is not an address of this host`)
    expect(s.message).toContain(c.address)
    // Loopback, with the driver on another host: nobody there could reach it.
    const loop = drive('start', [member(b), member(c, { address: '127.0.0.1', advertise: '127.0.0.1' })])
    const l = await loop.step('start', 45_000)
    expect(l.ok).toBe(false)
    expect(l.message).toContain(
      `FRAY_ADVERTISE_HOST=127.0.0.1 is a loopback address, but the driver is at ${a.address}`,
    )
  }, 100_000)

  test('a host cut mid-collective fails the collective naming the member, within the peer timeout', async () => {
    const d = drive('partition', [member(b), member(c)])
    await d.step('waiting', 45_000)
    c.cut()
    try {
      const s = await d.step('partition', PEER_TIMEOUT_MS + 20_000)
      expect(s.ok).toBe(false)
      expect(s.code).toBe('COLLECTIVE_PEER_LOST')
      expect(s.message).toContain(`mesh member 1 (at ${c.address}:`)
      expect(s.message).toContain('FRAY_PEER_TIMEOUT_MS')
    } finally {
      c.restore()
    }
  }, 100_000)
})

describe('advertised addresses, checked before an actor host serves', () => {
  const local = ['127.0.0.1', '10.1.2.3']
  const check = (env: NodeJS.ProcessEnv) => () => hostAddresses(env, local)
  test('an address of this host, listened on, is given out', () => {
    expect(hostAddresses({ FRAY_LISTEN_HOST: '10.1.2.3' }, local)).toEqual({
      listen: '10.1.2.3',
      advertise: '10.1.2.3',
    })
    expect(hostAddresses({ FRAY_LISTEN_HOST: '0.0.0.0', FRAY_ADVERTISE_HOST: '10.1.2.3' }, local).advertise).toBe(
      '10.1.2.3',
    )
    // A name is not checked here (it may resolve anywhere); a mesh link that cannot reach it names it.
    expect(hostAddresses({ FRAY_LISTEN_HOST: '0.0.0.0', FRAY_ADVERTISE_HOST: 'node-7' }, local).advertise).toBe(
      'node-7',
    )
    expect(hostAddresses({}, local)).toEqual({ listen: '127.0.0.1', advertise: '127.0.0.1' })
    // An iris task listening everywhere gives out the address its worker registered by.
    expect(hostAddresses({ FRAY_LISTEN_HOST: '0.0.0.0', IRIS_WORKER_HOST: '10.1.2.3' }, local).advertise).toBe(
      '10.1.2.3',
    )
    expect(check({ FRAY_LISTEN_HOST: '0.0.0.0', IRIS_WORKER_HOST: '10.7.7.7' })).toThrow(
      /IRIS_WORKER_HOST=10\.7\.7\.7 \(FRAY_ADVERTISE_HOST unset\) is not an address of this host/,
    )
  })
  test('an address of another host, a wildcard, one not listened on, loopback toward a remote driver: refused', () => {
    expect(check({ FRAY_LISTEN_HOST: '0.0.0.0', FRAY_ADVERTISE_HOST: '10.9.9.9' })).toThrow(
      /FRAY_ADVERTISE_HOST=10\.9\.9\.9 is not an address of this host \(this host's addresses: 10\.1\.2\.3\)/,
    )
    expect(check({ FRAY_LISTEN_HOST: '0.0.0.0' })).toThrow(/FRAY_LISTEN_HOST=0\.0\.0\.0 .*set FRAY_ADVERTISE_HOST/)
    expect(check({ FRAY_ADVERTISE_HOST: '10.1.2.3' })).toThrow(
      /FRAY_ADVERTISE_HOST=10\.1\.2\.3 but FRAY_LISTEN_HOST=127\.0\.0\.1: nothing listens on 10\.1\.2\.3/,
    )
    expect(check({ FRAY_DRIVER_ADDRESS: '10.1.2.9:4000' })).toThrow(/is a loopback address, but the driver is at 10/)
    expect(hostAddresses({ FRAY_DRIVER_ADDRESS: '127.0.0.1:4000' }, local).advertise).toBe('127.0.0.1')
  })
  test('FRAY_PEER_TIMEOUT_MS is a whole number of milliseconds, 0 or unset for none', () => {
    expect(peerTimeoutMs({})).toBe(0)
    expect(peerTimeoutMs({ FRAY_PEER_TIMEOUT_MS: '2500' })).toBe(2500)
    expect(() => peerTimeoutMs({ FRAY_PEER_TIMEOUT_MS: '2s' })).toThrow(/FRAY_PEER_TIMEOUT_MS=2s is not a whole number/)
  })
})
