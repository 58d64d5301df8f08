/**
 * Out-of-core dedup across network hosts: the object store (s3rver) and an iris controller on host A, iris workers
 * on hosts B and C (network namespaces with their own addresses and folders, `@marin/rigging/net-hosts`), and a
 * driver on A. The planted corpus's Parquet shards, zephyr's scratch and dedup's signatures, buckets and pairs are
 * all in the object store (no host reads another's folder); the signing and bucket tasks run on B and C, and the
 * exact and MinHash decisions equal the in-memory path's.
 */
import { readdirSync } from 'node:fs'
import { createRequire } from 'node:module'
import { resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { type HostsCluster, startHostsCluster } from '@marin/rigging/hosts-cluster'
import { type NetHost, netHostsSupport } from '@marin/rigging/net-hosts'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import type { Decisions, DedupHostsConfig } from '../test-support/dedup-hosts-driver.js'
import type { OutOfCoreStats } from './out-of-core.js'

const why = netHostsSupport()
if (why !== undefined) console.warn(`dedup across hosts skipped: ${why}`)

const TSX = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href
const DRIVER = resolve(import.meta.dirname, '..', 'test-support', 'dedup-hosts-driver.ts')
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
  let cluster: HostsCluster | undefined
  let a: NetHost
  let b: NetHost
  let c: NetHost
  afterAll(() => cluster?.close())

  beforeAll(async () => {
    cluster = await startHostsCluster({ irisBin: IRIS_BIN, token: TOKEN })
    a = cluster.a
    ;[b, c] = cluster.workers.map((w) => w.host) as [NetHost, NetHost]
  }, 45_000)

  test('exact and MinHash dedup with workers on hosts B and C equal the in-memory decisions', async () => {
    const config: DedupHostsConfig = {
      root: 's3://marin-test/dedup-hosts',
      controller: cluster!.controller,
      token: TOKEN,
      driverHost: a.address,
    }
    const s = await cluster!.drive<Done>(a, ['--import', TSX, DRIVER, JSON.stringify(config)])

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
