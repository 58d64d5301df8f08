/**
 * Warm runners: a job that names a runner has its tasks run as calls in a process the worker keeps, and still gets
 * what a task process gets (its own token and variables, its output, its outcome), shares the process only with
 * jobs that see the same environment from the same submitter, and fails or dies alone. Real cluster, real processes.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from 'vitest'
import type { IrisClient } from './client.js'
import { isIrisError } from './errors.js'
import { isAlive, killTagged, taggedProcesses } from './internal/test-processes.js'
import { resolveJobRequest, type JobRequest } from './job-spec.js'
import { LocalCluster } from './local-cluster.js'
import { WarmRunners } from './warm-runner.js'
import { createRequire } from 'node:module'
import { pathToFileURL } from 'node:url'

const FIXTURE = resolve(import.meta.dirname, 'internal', 'warm-fixture.ts')
const TSX = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href
const node = [process.execPath, '--import', TSX]
const RUNNER = { command: [...node, FIXTURE] }
const task = (...args: string[]) => [...node, FIXTURE, ...args]

let dir: string
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'iris-warm-'))
})
afterAll(() => rmSync(dir, { recursive: true, force: true }))
let tag = ''
beforeEach(() => {
  tag = `iris-warm-${process.pid}-${Math.random().toString(36).slice(2)}`
})
// What a failing test left running (a runner, a child it started) carries the tag of the test's jobs.
afterEach(() => {
  killTagged(tag)
})

type Report = {
  pid: number
  job: string
  token: string
  secret: string | null
  setter: string | null
  left: string | null
  cwd: string
  taskDir: string
}

async function lines(client: IrisClient, id: string): Promise<{ stream: string; line: string }[]> {
  const out: { stream: string; line: string }[] = []
  for await (const l of client.logs(id)) out.push({ stream: l.stream, line: l.line })
  return out
}

async function run(client: IrisClient, req: Omit<JobRequest, 'name'>) {
  const id = await client.submit({ name: 'warm', runner: RUNNER, ...req })
  const status = await client.wait(id, { timeoutMs: 60_000 })
  return { id, status, lines: await lines(client, id) }
}

async function report(client: IrisClient, req: Partial<JobRequest> = {}): Promise<Report> {
  const r = await run(client, { command: task('report'), ...req })
  expect(r.status.state, JSON.stringify(r.lines)).toBe('SUCCEEDED')
  const json = r.lines.filter((l) => l.stream === 'stdout' && l.line.startsWith('{'))
  expect(json).toHaveLength(1)
  return JSON.parse(json[0]!.line) as Report
}

describe('on a local cluster', () => {
  let cluster: LocalCluster
  let client: IrisClient
  beforeAll(async () => {
    cluster = await LocalCluster.start({ prefix: join(dir, 'cluster'), resources: { cpu: 2, memory: 2e9, gpu: 0 } })
    client = cluster.client()
  })
  afterAll(async () => {
    client.close()
    await cluster.stop()
  })

  test('jobs naming a runner run as calls in one warm process, each with its own token, env and output', async () => {
    const reports: Report[] = []
    for (let i = 0; i < 4; i++) reports.push(await report(client, { env: { KIND: 'same' } }))
    const pids = new Set(reports.map((r) => r.pid))
    expect(pids.size).toBe(1)
    expect(pids.has(process.pid)).toBe(false)
    for (const r of reports) {
      // Its own job's token and variables, its own folder as the working directory.
      expect(r.token.startsWith(`iris-job.${r.job}.`)).toBe(true)
      expect(r.cwd).toBe(r.taskDir)
      // Nothing a task set in the environment reaches the next; module state is the runner's (see OPS.md).
      expect(r.setter).toBeNull()
    }
    expect(new Set(reports.map((r) => r.job)).size).toBe(4)
    expect(reports[1]!.left).toBe(reports[0]!.job)
    // Each job's log holds its own stdout and stderr lines, no other's, and no end marker.
    const r = await run(client, { command: task('report'), env: { KIND: 'same' } })
    const self = JSON.parse(r.lines.find((l) => l.line.startsWith('{'))!.line) as Report
    expect(r.lines.map((l) => l.stream).sort()).toEqual(['stderr', 'stdout'])
    expect(r.lines.find((l) => l.stream === 'stderr')!.line).toBe(`stderr of ${self.job}`)
    expect(self.pid).toBe(reports[0]!.pid)
  }, 120_000)

  test('jobs with other settings or secrets never share a runner, and never see each other’s secret', async () => {
    process.env.IRIS_WARM_TEST_SECRET = 'hunter2-warm'
    const a = await report(client, { env: { KIND: 'a' } })
    const b = await report(client, { env: { KIND: 'b' } })
    const s = await report(client, { env: { KIND: 'a' }, secrets: { FIX_SECRET: 'env:IRIS_WARM_TEST_SECRET' } })
    const a2 = await report(client, { env: { KIND: 'a' } })
    expect(new Set([a.pid, b.pid, s.pid]).size).toBe(3)
    expect(s.secret).toBe('mraw-2retnuh')
    expect(a2.pid).toBe(a.pid)
    expect(a2.secret).toBeNull()
    expect(a.secret).toBeNull()
  }, 120_000)

  test('a task that exits, throws or dies fails only itself; the next task runs in a fresh runner', async () => {
    const first = await report(client, { env: { KIND: 'crash' } })
    const exited = await run(client, { command: task('exit', '3'), env: { KIND: 'crash' } })
    expect(exited.status.state).toBe('FAILED')
    expect(exited.status.tasks[0]!.exitCode).toBe(3)
    const threw = await run(client, { command: task('throw'), env: { KIND: 'crash' } })
    expect(threw.status.state).toBe('FAILED')
    expect(threw.lines.some((l) => l.stream === 'stderr' && l.line.includes('the task threw'))).toBe(true)
    const after = await report(client, { env: { KIND: 'crash' } })
    expect(after.pid).not.toBe(first.pid)
    // The runner of the task that threw was not reused either: module state starts empty.
    expect(after.left).toBeNull()
  }, 120_000)

  test('killing a task in a warm runner kills it; the next task runs', async () => {
    const id = await client.submit({ name: 'warm', runner: RUNNER, command: task('sleep'), env: { KIND: 'kill' } })
    for (;;) {
      if ((await lines(client, id)).some((l) => l.line === 'sleeping')) break
      await new Promise((r) => setTimeout(r, 100))
    }
    await client.kill(id)
    expect((await client.wait(id, { timeoutMs: 60_000 })).state).toBe('KILLED')
    expect((await report(client, { env: { KIND: 'kill' } })).job).toBeDefined()
  }, 120_000)

  const detached = (r: { lines: { stream: string; line: string }[] }) =>
    JSON.parse(r.lines.find((l) => l.stream === 'stdout' && l.line.startsWith('{'))!.line) as {
      pid: number
      child: number
    }

  test('a detached child a task starts ends with the task; the runner serves the next task', async () => {
    const env = { KIND: 'detach', IRIS_TEST_TAG: tag }
    const r = await run(client, { command: task('detach'), env })
    expect(r.status.state, JSON.stringify(r.lines)).toBe('SUCCEEDED')
    const { pid, child } = detached(r)
    // Before, the sleep lived on in the runner's keeping after the task had SUCCEEDED.
    expect(isAlive(child)).toBe(false)
    expect(isAlive(pid)).toBe(true)
    const next = await report(client, { env })
    expect(next.pid).toBe(pid)
    expect(taggedProcesses(tag)).toEqual([pid])
  }, 120_000)

  test('killing a task ends the detached child it started, with its runner', async () => {
    const env = { KIND: 'detach-kill', IRIS_TEST_TAG: tag }
    const id = await client.submit({ name: 'warm', runner: RUNNER, command: task('detach', 'stay'), env })
    let child = 0
    for (let i = 0; i < 300 && child === 0; i++) {
      const l = (await lines(client, id)).find((x) => x.line.startsWith('{'))
      if (l) child = (JSON.parse(l.line) as { child: number }).child
      else await new Promise((res) => setTimeout(res, 100))
    }
    expect(isAlive(child)).toBe(true)
    await client.kill(id)
    expect((await client.wait(id, { timeoutMs: 60_000 })).state).toBe('KILLED')
    for (let i = 0; i < 100 && isAlive(child); i++) await new Promise((res) => setTimeout(res, 20))
    expect(isAlive(child)).toBe(false)
    expect(taggedProcesses(tag)).toEqual([])
  }, 120_000)
})

test('a worker without warm runners runs the same jobs as processes of their own', async () => {
  const cluster = await LocalCluster.start({
    prefix: join(dir, 'cold'),
    resources: { cpu: 2, memory: 2e9, gpu: 0 },
    warmRunners: false,
  })
  const client = cluster.client()
  try {
    const a = await report(client)
    const b = await report(client)
    expect(a.pid).not.toBe(b.pid)
    expect(b.left).toBeNull()
  } finally {
    client.close()
    await cluster.stop()
  }
}, 120_000)

test('tasks of another submitter never share a runner', async () => {
  const runners = new WarmRunners({ cwd: dir })
  try {
    const one = async (submitter: string) => {
      const out: string[] = []
      const h = runners.run({
        runner: RUNNER.command,
        command: task('report'),
        env: { ...(process.env as Record<string, string>), IRIS_JOB_ID: submitter || 'root' },
        submitter,
        cwd: dir,
        logDir: mkdtempSync(join(dir, 'logs-')),
        onLine: (s, l) => (s === 'stdout' ? out.push(l) : undefined),
      })
      expect((await h.done).state).toBe('SUCCEEDED')
      return JSON.parse(out[0]!) as Report
    }
    const root = await one('')
    const child = await one('parent-job')
    const root2 = await one('')
    expect(child.pid).not.toBe(root.pid)
    expect(root2.pid).toBe(root.pid)
  } finally {
    await runners.close()
  }
}, 120_000)

test('a job cannot have both a runner and an image', () => {
  try {
    resolveJobRequest({ name: 'x', command: ['true'], image: 'busybox', runner: RUNNER })
    expect.unreachable()
  } catch (err) {
    expect(isIrisError(err, 'BAD_REQUEST')).toBe(true)
    expect((err as Error).message).toContain('runner')
  }
})
