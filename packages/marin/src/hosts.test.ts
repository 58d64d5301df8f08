/**
 * The executor across network hosts: an iris controller and the object store (s3rver) on host A, iris workers on
 * hosts B and C (network namespaces with their own addresses and folders, `@marin/rigging/net-hosts`). A driver on
 * A runs a small experiment (two parallel steps and a step that merges them, `fixtures/hosts-experiment.ts`) with
 * every step an iris job and the Marin prefix an `s3://` URL: no host has another's disk. Every step succeeds, the
 * parallel steps ran one on B and one on C, and the outputs are in the store; a second run, driven from host B,
 * skips every step.
 */
import { readdirSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { makeNetHosts, netHostsSupport, type NetHost, type NetHosts } from '@marin/rigging/net-hosts'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import type { HostsDriverConfig, HostsDriverDone } from './fixtures/hosts-driver.js'
import type { HostsMerged, HostsShard } from './fixtures/hosts-experiment.js'

const why = netHostsSupport()
if (why !== undefined) console.warn(`marin executor across hosts skipped: ${why}`)

const require = createRequire(import.meta.url)
const TSX = pathToFileURL(require.resolve('tsx')).href
const DRIVER = resolve(import.meta.dirname, 'fixtures/hosts-driver.ts')
const S3_HOST = resolve(import.meta.dirname, '../../zephyr/src/fixtures/s3-host.ts')
const IRIS_BIN = resolve(import.meta.dirname, '../../iris/bin/iris.js')
const TOKEN = 'marin-hosts-token-0123456789'
const PREFIX = 's3://marin-test/marin-hosts'

/** Files under a host's own folder that look like step outputs (none should: they belong in the store). */
const stepFiles = (dir: string): string[] =>
  (readdirSync(dir, { recursive: true }) as string[]).filter(
    (f) => /(shard|merged)\.json/.test(f) && !f.startsWith('s3/'),
  )

describe.skipIf(why !== undefined)(`marin executor across hosts${why ? ` (skipped: ${why})` : ''}`, () => {
  let a: NetHost
  let b: NetHost
  let c: NetHost
  let s3 = ''
  let controller = ''
  let net: NetHosts | undefined
  afterAll(() => net?.close())

  const env = (h: NetHost): Record<string, string> => ({
    MARIN_PREFIX: join(h.dir, '.marin'),
    IRIS_TOKEN: TOKEN,
    LOG_FORMAT: 'json',
    LOG_LEVEL: 'warn',
    AWS_ENDPOINT_URL: s3,
    AWS_ACCESS_KEY_ID: 'S3RVER',
    AWS_SECRET_ACCESS_KEY: 'S3RVER',
    AWS_REGION: 'us-east-1',
    // s3rver predates the SDK's default CRC checksums (aws-chunked uploads).
    AWS_REQUEST_CHECKSUM_CALCULATION: 'WHEN_REQUIRED',
    AWS_RESPONSE_CHECKSUM_VALIDATION: 'WHEN_REQUIRED',
  })

  beforeAll(async () => {
    net = makeNetHosts(3)
    ;[a, b, c] = net.hosts as [NetHost, NetHost, NetHost]
    const store = a.spawn(process.execPath, ['--import', TSX, S3_HOST, a.address, join(a.dir, 's3')])
    const listening = await store.waitFor(/^\{"listening".*$/m, 20_000).catch((e) => {
      throw new Error(`${e}; s3 server stderr: ${store.stderr().slice(-1000)}`)
    })
    s3 = (JSON.parse(listening[0]) as { listening: string }).listening
    controller = `${a.address}:10000`
    const ctl = a.spawn(
      process.execPath,
      [IRIS_BIN, 'controller', '--host', a.address, '--port', '10000', '--heartbeat', '500ms'],
      { env: env(a) },
    )
    await ctl.waitFor(/listening on (\S+)/, 20_000).catch((e) => {
      throw new Error(`${e}; controller stderr: ${ctl.stderr().slice(-1000)}`)
    })
    // One core each: the two parallel steps cannot share a worker.
    const workers = [
      [b, 'wb'],
      [c, 'wc'],
    ] as const
    const started = workers.map(([h, id]) =>
      h.spawn(
        process.execPath,
        [IRIS_BIN, 'worker', '--controller', controller, '--worker-id', id, '--resources', 'cpu=1,memory=4G'],
        { env: env(h) },
      ),
    )
    await Promise.all(
      started.map((w, i) =>
        w.waitFor(/registered with/, 20_000).catch((e) => {
          throw new Error(`${e}; worker ${workers[i]![1]} stderr: ${w.stderr().slice(-1000)}`)
        }),
      ),
    )
  }, 45_000)

  /** Runs the driver on host `h` to its `done` line. */
  const drive = async (h: NetHost): Promise<HostsDriverDone> => {
    const config: HostsDriverConfig = { prefix: PREFIX, controller, token: TOKEN }
    const p = h.spawn(process.execPath, ['--import', TSX, DRIVER, JSON.stringify(config)], { env: env(h) })
    const m = await p.waitFor(/^\{"step":"(done|error)".*$/m, 50_000).catch((e: Error) => {
      throw new Error(`${e.message}; driver stderr: ${p.stderr().slice(-2000)}`)
    })
    const s = JSON.parse(m[0]) as HostsDriverDone | { step: 'error'; message: string }
    if (s.step === 'error') throw new Error(`driver failed: ${s.message}; stderr: ${p.stderr().slice(-2000)}`)
    return s
  }

  test('driven from A, steps run as iris jobs on B and C, prefix in the store; a run from B skips all', async () => {
    const first = await drive(a)
    expect(first.status, JSON.stringify(first.steps)).toBe('SUCCESS')
    expect(first.steps.map((s) => [s.name, s.status]).sort()).toEqual(
      ['merge', 'shard-0', 'shard-1'].map((n) => [n, 'SUCCESS']),
    )
    // Every output is a URL in the store, not a local folder.
    for (const s of first.steps) expect(s.outputPath.startsWith(`${PREFIX}/`)).toBe(true)
    const shards = Object.entries(first.outputs)
      .filter(([k]) => /^shard-\d\/shard\.json$/.test(k))
      .map(([, t]) => JSON.parse(t) as HostsShard)
    expect(shards.map((s) => s.shard).sort()).toEqual([0, 1])
    // The parallel steps ran one on B and one on C; none on the driver's host.
    expect(shards.map((s) => s.hosts).sort()).toEqual([[b.address], [c.address]].sort())
    const merged = JSON.parse(first.outputs['merge/merged.json'] ?? 'null') as HostsMerged
    expect(merged).toEqual({ count: 100, sum: Array.from({ length: 100 }, (_, k) => k).reduce((x, y) => x + y, 0) })
    // Step outputs are in the object store only: no host's own folder holds one.
    for (const h of [a, b, c]) expect(stepFiles(h.dir)).toEqual([])
    expect(stepFiles(join(a.dir, 's3')).length).toBeGreaterThanOrEqual(3)

    const again = await drive(b)
    expect(again.status, JSON.stringify(again.steps)).toBe('SUCCESS')
    expect(again.steps.map((s) => s.status)).toEqual(first.steps.map(() => 'SKIPPED'))
    expect(again.outputs).toEqual(first.outputs)
  }, 110_000)
})
