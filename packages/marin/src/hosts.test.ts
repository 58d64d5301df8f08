/**
 * The executor across network hosts: an iris controller and the object store (s3rver) on host A, iris workers on
 * hosts B and C (network namespaces with their own addresses and folders, `@marin/rigging/net-hosts`). A driver on
 * A runs a small experiment (two parallel steps and a step that merges them, `fixtures/hosts-experiment.ts`) with
 * every step an iris job and the Marin prefix an `s3://` URL: no host has another's disk. Every step succeeds, the
 * parallel steps ran one on B and one on C, and the outputs are in the store; a second run, driven from host B,
 * skips every step. The same for the quickstart's data steps (Brown text, ingest, dedup, BPE token cache) and a
 * small training (`fixtures/s3-prefix-experiment.ts`): datasets, caches and the model in the store under `s3://`.
 * One driver process a host serves both of its runs (`fixtures/hosts-driver.ts`), B's each once A's is done.
 */
import { readdirSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { type HostsCluster, startHostsCluster } from '@marin/rigging/hosts-cluster'
import { type HostProcess, machineSlowdown, type NetHost, netHostsSupport } from '@marin/rigging/net-hosts'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import type { HostsDriverConfig, HostsDriverDone, HostsDriverRun } from './fixtures/hosts-driver.js'
import type { HostsMerged, HostsShard } from './fixtures/hosts-experiment.js'

const why = netHostsSupport()
if (why !== undefined) console.warn(`marin executor across hosts skipped: ${why}`)

const TSX = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href
const DRIVER = resolve(import.meta.dirname, 'fixtures/hosts-driver.ts')
const IRIS_BIN = resolve(import.meta.dirname, '../../iris/bin/iris.js')
const TOKEN = 'marin-hosts-token-0123456789'
const PREFIX = 's3://marin-test/marin-hosts'
const DATA_PREFIX = 's3://marin-test/marin-hosts-data'
/** Every time limit here is for an idle machine times this (the load when the file starts: see machineSlowdown). */
const SLOW = machineSlowdown()
/** The store, the controller, then the workers, each within its start limit (20 s times SLOW). */
const START_MS = 70_000 * SLOW
const [STEPS_TEST_MS, DATA_TEST_MS] = [110_000 * SLOW, 200_000 * SLOW]

/** Files under a host's own folder that look like step outputs (none should: they belong in the store). */
const stepFiles = (dir: string): string[] =>
  (readdirSync(dir, { recursive: true }) as string[]).filter(
    (f) => /(shard|merged)\.json/.test(f) && !f.startsWith('s3/'),
  )

describe.skipIf(why !== undefined)(`marin executor across hosts${why ? ` (skipped: ${why})` : ''}`, () => {
  let cluster: HostsCluster | undefined
  let a: NetHost
  let b: NetHost
  let c: NetHost
  afterAll(() => cluster?.close())

  // One core each: the two parallel steps cannot share a worker.
  beforeAll(async () => {
    cluster = await startHostsCluster({ irisBin: IRIS_BIN, token: TOKEN })
    a = cluster.a
    ;[b, c] = cluster.workers.map((w) => w.host) as [NetHost, NetHost]
    fromA = driver(a, false)
    fromB = driver(b, true)
  }, START_MS)

  /** A driver process on `h` (one for all its runs, in turn); each of a gated one's runs waits for `go()`. */
  type Driver = { go(): void; result(experiment: HostsDriverRun['experiment']): Promise<HostsDriverDone> }
  const RUNS: HostsDriverRun[] = [
    { experiment: 'hosts', prefix: PREFIX, runMs: 45_000 * SLOW },
    { experiment: 'data', prefix: DATA_PREFIX, runMs: 120_000 * SLOW },
  ]
  const driver = (h: NetHost, gated: boolean): Driver => {
    const config: HostsDriverConfig = { controller: cluster!.controller, token: TOKEN, runs: RUNS, gated }
    const argv = ['--import', TSX, DRIVER, JSON.stringify(config)]
    const p: HostProcess = h.spawn(process.execPath, argv, { env: cluster!.env(h), stdin: gated })
    const failed = (why: string) => new Error(`driver on ${h.address}: ${why}; stderr: ${p.stderr().slice(-2000)}`)
    return {
      go: () => void p.child.stdin!.write('go\n'),
      async result(experiment) {
        // At most the runs before it and its own.
        const upTo = RUNS.findIndex((r) => r.experiment === experiment) + 1
        const ms = RUNS.slice(0, upTo).reduce((t, r) => t + r.runMs, 30_000 * SLOW)
        const line = new RegExp(`^\\{"step":"(done|error)","experiment":"${experiment}".*$`, 'm')
        const m = await p.waitFor(line, ms).catch((e: Error) => {
          throw failed(e.message)
        })
        const out = JSON.parse(m[0]) as HostsDriverDone | { step: 'error'; message: string }
        if (out.step === 'error') throw failed(out.message)
        return out
      },
    }
  }
  /** Driven from A, then the same runs from B, each once A's is done. */
  let fromA: Driver
  let fromB: Driver

  test(
    'driven from A, steps run as iris jobs on B and C, prefix in the store; a run from B skips all',
    async () => {
      const first = await fromA.result('hosts')
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

      fromB.go()
      const again = await fromB.result('hosts')
      expect(again.status, JSON.stringify(again.steps)).toBe('SUCCESS')
      expect(again.steps.map((s) => s.status)).toEqual(first.steps.map(() => 'SKIPPED'))
      expect(again.outputs).toEqual(first.outputs)
    },
    STEPS_TEST_MS,
  )

  test(
    'quickstart data steps and a training as iris jobs, prefix in the store; B reruns, skipping all',
    async () => {
      const prefix = DATA_PREFIX
      const first = await fromA.result('data')
      expect(first.status, JSON.stringify(first.steps)).toBe('SUCCESS')
      const names = ['brown-text', 'brown', 'brown-dedup', 'brown-bpe', 'gpt-brown']
      expect(first.steps.map((s) => [s.name, s.status]).sort()).toEqual(names.map((n) => [n, 'SUCCESS']).sort())
      for (const s of first.steps) expect(s.outputPath.startsWith(`${prefix}/`)).toBe(true)
      const refs = Object.fromEntries(
        Object.entries(first.outputs).map(([k, t]) => [
          k,
          (JSON.parse(t) as { artifacts: { name: string }[] }).artifacts,
        ]),
      )
      expect(refs['brown-bpe/artifacts.json']?.[0]).toMatchObject({ name: 'token-caches/brown-bpe', version: 1 })
      expect(refs['gpt-brown/artifacts.json']?.[0]).toMatchObject({ name: 'models/gpt-brown', version: 1 })
      // No host's own folder holds a step's output or the store: both are in the object store only.
      const stored = (dir: string) =>
        (readdirSync(dir, { recursive: true }) as string[]).filter(
          (f) => /artifacts\.json$|(^|\/)store\/artifacts\//.test(f) && !f.startsWith('s3/'),
        )
      for (const h of [a, b, c]) expect(stored(h.dir)).toEqual([])

      fromB.go()
      const again = await fromB.result('data')
      expect(again.steps.map((s) => s.status)).toEqual(first.steps.map(() => 'SKIPPED'))
      expect(again.outputs).toEqual(first.outputs)
    },
    DATA_TEST_MS,
  )
})
