/**
 * Benchmarks of iris: 1,000 trivial jobs (`true`) through a local cluster
 * (gRPC client → controller with SQLite state → worker → child process) against
 * spawning the same commands directly with child_process, with the same
 * concurrency. Reports jobs/s and submit-to-running latency (p50, p99).
 */
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setLogLevel } from '@marin/rigging'
import { emit, median } from '@marin/rigging/bench'
import { LocalCluster } from '../src/local-cluster.js'
import { parseResources } from '../src/resources.js'
import { schedule, type PendingTask, type WorkerView } from '../src/scheduler.js'

const JOBS = 1000
const SLOTS = 8
const RUNS = 3

setLogLevel('warn')

const pct = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!

type RunResult = { seconds: number; latenciesMs: number[] }

async function irisRun(): Promise<RunResult> {
  const prefix = mkdtempSync(join(tmpdir(), 'iris-bench-'))
  const cluster = await LocalCluster.start({
    prefix,
    heartbeatMs: 1000,
    resources: { cpu: SLOTS, memory: 64 * 2 ** 30, gpu: 0 },
  })
  const client = cluster.client()
  try {
    const t0 = Date.now()
    const ids: string[] = []
    // Submit everything at once, a few calls in flight at a time.
    for (let i = 0; i < JOBS; i += 50) {
      ids.push(
        ...(await Promise.all(
          Array.from({ length: Math.min(50, JOBS - i) }, (_, k) =>
            client.submit({ name: `bench${i + k}`, resources: 'cpu=1,memory=64M', command: ['true'] }),
          ),
        )),
      )
    }
    const jobs = await Promise.all(ids.map((id) => client.wait(id, { pollMs: 100 })))
    const seconds = (Math.max(...jobs.map((j) => j.finishedAt!)) - t0) / 1000
    const bad = jobs.filter((j) => j.state !== 'SUCCEEDED')
    if (bad.length) throw new Error(`${bad.length} jobs did not succeed, e.g. ${JSON.stringify(bad[0])}`)
    return { seconds, latenciesMs: jobs.map((j) => j.startedAt! - j.submittedAt) }
  } finally {
    client.close()
    await cluster.stop()
    rmSync(prefix, { recursive: true, force: true })
  }
}

async function directRun(): Promise<RunResult> {
  const t0 = Date.now()
  const latenciesMs: number[] = []
  let next = 0
  const lane = async () => {
    while (next < JOBS) {
      next++
      await new Promise<void>((resolve, reject) => {
        const child = spawn('true', [], { stdio: 'ignore' })
        child.once('spawn', () => latenciesMs.push(Date.now() - t0))
        child.once('error', reject)
        child.once('exit', () => resolve())
      })
    }
  }
  await Promise.all(Array.from({ length: SLOTS }, lane))
  return { seconds: (Date.now() - t0) / 1000, latenciesMs }
}

const iris: RunResult[] = []
const direct: RunResult[] = []
for (let r = 0; r < RUNS; r++) {
  direct.push(await directRun())
  iris.push(await irisRun())
  process.stderr.write(
    `run ${r + 1}/${RUNS}: iris ${iris[r]!.seconds.toFixed(2)} s, direct ${direct[r]!.seconds.toFixed(2)} s\n`,
  )
}

const rate = (rs: RunResult[]) => median(rs.map((r) => JOBS / r.seconds))
const lat = (rs: RunResult[], p: number) => median(rs.map((r) => pct(r.latenciesMs, p)))
emit({ bench: 'iris', metric: 'jobs_per_s', value: rate(iris), unit: 'jobs/s', baseline: rate(direct) })
emit({
  bench: 'iris',
  metric: 'submit_to_running_p50',
  value: lat(iris, 50),
  unit: 'ms',
  baseline: lat(direct, 50),
  lowerIsBetter: true,
})
emit({
  bench: 'iris',
  metric: 'submit_to_running_p99',
  value: lat(iris, 99),
  unit: 'ms',
  baseline: lat(direct, 99),
  lowerIsBetter: true,
})

// The scheduler alone: one pass over 1,000 pending tasks and 50 workers.
const R = parseResources('cpu=1,memory=1G,gpu=0')
const pending: PendingTask[] = Array.from({ length: 1000 }, (_, i) => ({
  jobId: `j${i}`,
  taskIndex: 0,
  priority: (['production', 'interactive', 'batch'] as const)[i % 3]!,
  submitSeq: i,
  resources: R,
  needsDocker: false,
}))
const workers: WorkerView[] = Array.from({ length: 50 }, (_, i) => ({
  workerId: `w${i}`,
  total: parseResources('cpu=16,memory=64G'),
  free: parseResources('cpu=16,memory=64G'),
  docker: false,
}))
const passes: number[] = []
for (let r = 0; r < 7; r++) {
  const t = process.hrtime.bigint()
  schedule({ pending, workers })
  passes.push(Number(process.hrtime.bigint() - t) / 1e6)
}
emit({ bench: 'iris', metric: 'schedule_pass_1000_tasks_50_workers', value: median(passes), unit: 'ms' })
