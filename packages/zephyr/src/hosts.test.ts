/**
 * zephyr across network hosts: the object store (s3rver) and an iris controller on host A, iris workers on hosts
 * B and C (network namespaces with their own addresses and folders, `@marin/rigging/net-hosts`), and a driver on
 * A whose pipeline (filter, map, a groupBy shuffle) runs its two workers as fray actors on B and C. Inputs,
 * shuffle buckets and outputs are all in the object store (each host has only its own scratch folder), and the
 * output equals the same pipeline's with both workers on host A, and the result computed without zephyr.
 */
import { readdirSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { makeNetHosts, netHostsSupport, type NetHost, type NetHosts } from '@marin/rigging/net-hosts'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import type { HostsDriverConfig } from './fixtures/hosts-driver.js'
import { type HostsGroup, hostsExpected } from './fixtures/hosts-data.js'

const why = netHostsSupport()
if (why !== undefined) console.warn(`zephyr across hosts skipped: ${why}`)

const TSX = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href
const DRIVER = resolve(import.meta.dirname, 'fixtures/hosts-driver.ts')
const S3_HOST = resolve(import.meta.dirname, 'fixtures/s3-host.ts')
const IRIS_BIN = resolve(import.meta.dirname, '../../iris/bin/iris.js')
const TOKEN = 'zephyr-hosts-token-0123456789'
const ROOT = 's3://marin-test/zephyr-hosts'

type Done = { step: 'done'; files: Record<string, string>; namespaces: string[]; recordsIn: number }

/** Files under `dir` (a host's own folder) that look like zephyr's: outputs, shuffle scratch, cached inputs. */
const pipelineFiles = (dir: string): string[] =>
  (readdirSync(dir, { recursive: true }) as string[]).filter(
    (f) => /zephyr-scratch|part-\d+-of-\d+|\.jsonl$/.test(f) && !f.startsWith('s3/') && !f.startsWith('.marin/'),
  )

const groups = (files: Record<string, string>): HostsGroup[] =>
  Object.values(files)
    .flatMap((t) => t.split('\n').filter(Boolean))
    .map((l) => JSON.parse(l) as HostsGroup)
    .sort((x, y) => x.lang.localeCompare(y.lang))

describe.skipIf(why !== undefined)(`zephyr across hosts${why ? ` (skipped: ${why})` : ''}`, () => {
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
    s3 = JSON.parse(
      (
        await store.waitFor(/^\{"listening".*$/m, 20_000).catch((e) => {
          throw new Error(`${e}; s3 server stderr: ${store.stderr().slice(-1000)}`)
        })
      )[0],
    ).listening as string
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

  /** Runs the driver on host A to its `done` line. */
  const drive = async (config: Omit<HostsDriverConfig, 'root'>): Promise<Done> => {
    const full: HostsDriverConfig = { root: ROOT, ...config }
    const p = a.spawn(process.execPath, ['--import', TSX, DRIVER, JSON.stringify(full)], { env: env(a) })
    const m = await p.waitFor(/^\{"step":"(done|error)".*$/m, 50_000).catch((e: Error) => {
      throw new Error(`${e.message}; driver stderr: ${p.stderr().slice(-2000)}`)
    })
    const s = JSON.parse(m[0]) as Done | { step: 'error'; message: string }
    if (s.step === 'error') throw new Error(`driver failed: ${s.message}; stderr: ${p.stderr().slice(-2000)}`)
    return s
  }

  test('workers on hosts B and C through the object store give the one-host output', async () => {
    const across = await drive({
      mode: 'hosts',
      out: 'across',
      seed: true,
      controller,
      token: TOKEN,
      driverHost: a.address,
    })
    // Each worker ran on a host of its own, neither on the driver's.
    expect([...across.namespaces].sort()).toEqual([b.ns, c.ns].sort())
    const here = await drive({ mode: 'local', out: 'here' })
    expect(here.namespaces).toEqual([a.ns, a.ns])

    expect(Object.keys(across.files).sort()).toEqual(['part-00000-of-00002.jsonl', 'part-00001-of-00002.jsonl'])
    expect(across.files).toEqual(here.files)
    expect(groups(across.files)).toEqual(hostsExpected())
    expect(across.recordsIn).toBe(600)
    // Scratch (the shuffle's buckets) is in the object store: no host's own folder holds pipeline data.
    for (const h of [a, b, c]) expect(pipelineFiles(h.dir)).toEqual([])
  }, 110_000)
})
