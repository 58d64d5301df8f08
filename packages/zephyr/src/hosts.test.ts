/**
 * zephyr across network hosts: the object store (s3rver) and an iris controller on host A, iris workers on hosts
 * B and C (network namespaces with their own addresses and folders, `@marin/rigging/net-hosts`), and a driver on
 * A whose pipeline (filter, map, a groupBy shuffle) runs its two workers as fray actors on B and C. Inputs,
 * shuffle buckets and outputs are all in the object store (each host has only its own scratch folder), and the
 * output equals the same pipeline's with both workers on host A, and the result computed without zephyr.
 * A fault: host B's link cut while the first stage runs. Zephyr's design is to retry: iris loses B's worker, the
 * actor that ran there starts again on C (fray restarts it), the executor runs B's unfinished tasks again, and the
 * pipeline finishes with both workers on C and the same bytes as the one-host run.
 */
import { readdirSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { type HostsCluster, startHostsCluster } from '@marin/rigging/hosts-cluster'
import { machineSlowdown, type NetHost, netHostsSupport } from '@marin/rigging/net-hosts'
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

type Done = {
  step: 'done'
  files: Record<string, string>
  namespaces: string[]
  recordsIn: number
  retries: number
}

/** Files under `dir` (a host's own folder) that look like zephyr's: outputs, shuffle scratch, cached inputs. */
const pipelineFiles = (dir: string): string[] =>
  (readdirSync(dir, { recursive: true }) as string[]).filter(
    (f) => /zephyr-scratch|part-\d+-of-\d+|\.jsonl$/.test(f) && !f.startsWith('s3/') && !f.startsWith('.marin/'),
  )

/** First-stage shards of the run `out` whose done marker is in the store (s3rver's folder on host A). */
const firstStageDone = (dir: string, out: string): number =>
  (readdirSync(join(dir, 's3'), { recursive: true }) as string[]).filter((f) =>
    new RegExp(`scratch-${out}/(.*/)?s0/done/\\d+`).test(f),
  ).length

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
    // Two cores a worker, so that the actor of a lost host can start again on the other (iris spreads the first
    // two, one a host); a worker silent for 3 s is lost.
    cluster = await startHostsCluster({
      irisBin: IRIS_BIN,
      token: TOKEN,
      workerResources: 'cpu=2,memory=4G',
      workerTimeout: '3s',
    })
    a = cluster.a
    ;[b, c] = cluster.workers.map((w) => w.host) as [NetHost, NetHost]
  }, 45_000)

  /** Runs the driver on host A to its `done` line. */
  const drive = (config: Omit<HostsDriverConfig, 'root'>): Promise<Done> => {
    const full: HostsDriverConfig = { root: ROOT, ...config }
    return cluster!.drive<Done>(a, ['--import', TSX, DRIVER, JSON.stringify(full)])
  }

  let oneHost: Record<string, string> | undefined

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
    oneHost = here.files
    expect(groups(across.files)).toEqual(hostsExpected())
    expect(across.recordsIn).toBe(600)
    // Scratch (the shuffle's buckets) is in the object store: no host's own folder holds pipeline data.
    for (const h of [a, b, c]) expect(pipelineFiles(h.dir)).toEqual([])
  }, 110_000)

  test('a worker host partitioned mid-pipeline: it finishes on the other host with the same bytes', async () => {
    const run = drive({
      mode: 'hosts',
      out: 'fault',
      seed: true,
      controller: cluster!.controller,
      token: TOKEN,
      driverHost: a.address,
      // The five paced shards take 1.5 s each (more on a loaded machine, where this process may also wake late).
      slowMs: Math.round(15 * machineSlowdown()),
    })
    // Mid-pipeline: a first-stage shard has committed (its done marker is in the store) and others still run.
    const started = Date.now()
    while (firstStageDone(a.dir, 'fault') === 0) {
      if (Date.now() - started > 40_000) throw new Error('no first-stage shard finished within 40 s')
      await new Promise((r) => setTimeout(r, 20))
    }
    expect(firstStageDone(a.dir, 'fault')).toBeLessThan(6)
    b.cut()
    let done: Done
    try {
      done = await run
    } finally {
      b.restore()
    }
    // The lost host's task ran again, and both workers ended on C; the output is the one-host run's, byte for byte.
    expect(done.retries).toBeGreaterThanOrEqual(1)
    expect(done.namespaces).toEqual([c.ns, c.ns])
    expect(done.files).toEqual(oneHost ?? 'the first test did not run')
    expect(groups(done.files)).toEqual(hostsExpected())
  }, 120_000)
})
