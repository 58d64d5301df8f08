/**
 * Out-of-core dedup across network hosts: the object store (s3rver) and an iris controller on host A, iris workers
 * on hosts B and C (network namespaces with their own addresses and folders, `@marin/rigging/net-hosts`), and a
 * driver on A. The planted corpus's Parquet shards, zephyr's scratch and dedup's signatures, buckets and pairs are
 * all in the object store (no host reads another's folder); the signing and bucket tasks run on B and C, and the
 * exact and MinHash decisions equal the in-memory path's.
 */
import { readdirSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { makeNetHosts, netHostsSupport, type NetHost, type NetHosts } from '@marin/rigging/net-hosts'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import type { Decisions, DedupHostsConfig } from '../test-support/dedup-hosts-driver.js'
import type { OutOfCoreStats } from './out-of-core.js'

const why = netHostsSupport()
if (why !== undefined) console.warn(`dedup across hosts skipped: ${why}`)

const TSX = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href
const DRIVER = resolve(import.meta.dirname, '..', 'test-support', 'dedup-hosts-driver.ts')
// The suite's object store for tests across hosts (s3rver on one host), and the iris command.
const S3_HOST = resolve(import.meta.dirname, '../../../zephyr/src/fixtures/s3-host.ts')
const IRIS_BIN = resolve(import.meta.dirname, '../../../iris/bin/iris.js')
const TOKEN = 'dedup-hosts-token-0123456789'

type Done = {
  step: 'done'
  documents: number
  shards: number
  mem: Decisions
  ooc: Decisions
  stats: OutOfCoreStats
  namespaces: string[]
  scratchLeft: number
}

/** Files under `dir` (a host's own folder) that look like dedup's or zephyr's: buckets, pairs, scratch, shards. */
const pipelineFiles = (dir: string): string[] =>
  (readdirSync(dir, { recursive: true }) as string[]).filter(
    (f) => /\.bin$|\.parquet$|zephyr-|datakit-dedup-/.test(f) && !f.startsWith('s3/') && !f.startsWith('.marin/'),
  )

describe.skipIf(why !== undefined)(`dedup across hosts${why ? ` (skipped: ${why})` : ''}`, () => {
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
    const up = await store.waitFor(/^\{"listening".*$/m, 20_000).catch((e) => {
      throw new Error(`${e}; s3 server stderr: ${store.stderr().slice(-1000)}`)
    })
    s3 = (JSON.parse(up[0]) as { listening: string }).listening
    controller = `${a.address}:10000`
    const ctl = a.spawn(
      process.execPath,
      [IRIS_BIN, 'controller', '--host', a.address, '--port', '10000', '--heartbeat', '500ms'],
      { env: env(a) },
    )
    await ctl.waitFor(/listening on (\S+)/, 20_000).catch((e) => {
      throw new Error(`${e}; controller stderr: ${ctl.stderr().slice(-1000)}`)
    })
    for (const [h, id] of [
      [b, 'wb'],
      [c, 'wc'],
    ] as const)
      h.spawn(
        process.execPath,
        [IRIS_BIN, 'worker', '--controller', controller, '--worker-id', id, '--resources', 'cpu=1,memory=4G'],
        { env: env(h) },
      )
  }, 45_000)

  test('exact and MinHash dedup with workers on hosts B and C equal the in-memory decisions', async () => {
    const config: DedupHostsConfig = {
      root: 's3://marin-test/dedup-hosts',
      controller,
      token: TOKEN,
      driverHost: a.address,
    }
    const p = a.spawn(process.execPath, ['--import', TSX, DRIVER, JSON.stringify(config)], { env: env(a) })
    const m = await p.waitFor(/^\{"step":"(done|error)".*$/m, 50_000).catch((e: Error) => {
      throw new Error(`${e.message}; driver stderr: ${p.stderr().slice(-2000)}`)
    })
    const s = JSON.parse(m[0]) as Done | { step: 'error'; message: string }
    if (s.step === 'error') throw new Error(`driver failed: ${s.message}; stderr: ${p.stderr().slice(-2000)}`)

    // Each worker ran on a host of its own, neither on the driver's.
    expect([...s.namespaces].sort()).toEqual([b.ns, c.ns].sort())
    expect(s.stats).toMatchObject({ shards: 3, buckets: 4 })
    expect(s.shards).toBe(3)
    // The planted copies: 5 exact (one text thrice), 4 near copies, each with its original.
    expect(s.mem).toMatchObject({ exactDuplicates: 5, fuzzyClusters: 4, fuzzyDuplicates: 4 })
    expect(s.mem.removed).toHaveLength(9)
    expect(s.ooc).toEqual(s.mem)
    // The scratch in the object store is gone, and no host's own folder holds dedup's files.
    expect(s.scratchLeft).toBe(0)
    for (const h of [a, b, c]) expect(pipelineFiles(h.dir)).toEqual([])
  }, 110_000)
})
