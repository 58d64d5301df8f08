/**
 * zephyr across network hosts: the object store (s3rver) and an iris controller on host A, iris workers on hosts
 * B and C (network namespaces with their own addresses and folders, `@marin/rigging/net-hosts`), and a driver on
 * A whose pipeline (filter, map, a groupBy shuffle) runs its two workers as fray actors on B and C. Inputs,
 * shuffle buckets and outputs are all in the object store (each host has only its own scratch folder), and the
 * output equals the same pipeline's with both workers on host A, and the result computed without zephyr.
 */
import { readdirSync } from 'node:fs'
import { createRequire } from 'node:module'
import { resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { type HostsCluster, type NetHost, netHostsSupport, startHostsCluster } from '@marin/rigging/net-hosts'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import type { HostsDriverConfig } from './fixtures/hosts-driver.js'
import { type HostsGroup, hostsExpected } from './fixtures/hosts-data.js'

const why = netHostsSupport()
if (why !== undefined) console.warn(`zephyr across hosts skipped: ${why}`)

const TSX = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href
const DRIVER = resolve(import.meta.dirname, 'fixtures/hosts-driver.ts')
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

  /** Runs the driver on host A to its `done` line. */
  const drive = (config: Omit<HostsDriverConfig, 'root'>): Promise<Done> => {
    const full: HostsDriverConfig = { root: ROOT, ...config }
    return cluster!.drive<Done>(a, ['--import', TSX, DRIVER, JSON.stringify(full)])
  }

  test('workers on hosts B and C through the object store give the one-host output', async () => {
    const across = await drive({
      mode: 'hosts',
      out: 'across',
      seed: true,
      controller: cluster!.controller,
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
