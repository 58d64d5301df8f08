/**
 * A controller and two workers as separate processes on loopback, driven through
 * the gRPC client and the `iris` CLI.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { IrisClient } from './client.js'
import { runIris, startIris, type IrisProcess } from './internal/test-processes.js'

let dir: string
let controller: IrisProcess
let address: string
let port: number
const workers = new Map<string, IrisProcess>()
let client: IrisClient
const procs: IrisProcess[] = []

const CONTROLLER_FLAGS = ['--heartbeat', '300ms', '--worker-timeout', '2s']

function startController(p: number): IrisProcess {
  const c = startIris(
    ['controller', '--port', String(p), '--state', join(dir, 'state', 'iris.sqlite'), ...CONTROLLER_FLAGS],
    { logDir: dir, name: 'controller' },
  )
  procs.push(c)
  return c
}

// The controller makes its token beside the state; workers and the CLI are pointed at it.
const tokenFile = () => join(dir, 'state', 'token')

async function startWorker(id: string): Promise<IrisProcess> {
  const w = startIris(
    [
      'worker',
      '--controller',
      address,
      '--worker-id',
      id,
      '--work-dir',
      join(dir, 'work', id),
      '--resources',
      'cpu=4,memory=4G,gpu=0',
      '--retry-delay',
      '100ms',
      '--kill-grace',
      '1s',
    ],
    { logDir: dir, name: id, env: { IRIS_TOKEN_FILE: tokenFile() } },
  )
  procs.push(w)
  await w.waitFor(/registered with/)
  workers.set(id, w)
  return w
}

const cli = ([command, ...rest]: string[]) =>
  runIris([command!, '--controller', address, ...rest], {
    logDir: dir,
    name: 'cli',
    env: { IRIS_TOKEN_FILE: tokenFile() },
  })

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'iris-cluster-'))
  mkdirSync(join(dir, 'marks'))
  controller = startController(0)
  const m = await controller.waitFor(/listening on (\S+)/)
  address = m[1]!
  port = Number(address.split(':').pop())
  await Promise.all([startWorker('wa'), startWorker('wb')])
  client = new IrisClient({ controller: address, token: readFileSync(tokenFile(), 'utf8').trim() })
}, 60_000)

afterAll(async () => {
  client?.close()
  for (const p of procs) if (p.child.exitCode === null) p.child.kill('SIGTERM')
  await Promise.all(procs.map((p) => p.exited))
  rmSync(dir, { recursive: true, force: true })
}, 30_000)

// Each run appends one line to marks/<job id>: a job run twice would have two.
const marker = () => `echo "$IRIS_TASK_INDEX $IRIS_ATTEMPT $IRIS_WORKER_ID" >> ${join(dir, 'marks')}/$IRIS_JOB_ID`
const marks = (jobId: string) =>
  readFileSync(join(dir, 'marks', jobId), 'utf8')
    .trim()
    .split('\n')

describe.sequential('iris cluster of separate processes', () => {
  test('200 short jobs submitted at once all succeed, none lost or run twice', async () => {
    const ids = await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        client.submit({ name: `short${i}`, resources: 'cpu=0.5,memory=64M', command: ['sh', '-c', marker()] }),
      ),
    )
    expect(new Set(ids).size).toBe(200)
    const jobs = await Promise.all(ids.map((id) => client.wait(id, { timeoutMs: 90_000 })))
    expect(jobs.map((j) => j.state)).toEqual(ids.map(() => 'SUCCEEDED'))
    for (const id of ids) expect(marks(id)).toHaveLength(1)
    const used = new Set(jobs.map((j) => j.tasks[0]!.workerId))
    expect(used).toEqual(new Set(['wa', 'wb']))
  }, 120_000)

  test('a job that exits 3 is FAILED with exit code 3 and its logs are kept', async () => {
    const sub = await cli([
      'submit',
      '--job-name',
      'three',
      '--resources',
      'cpu=1,memory=64M',
      '--',
      'sh',
      '-c',
      'echo about to fail; echo on stderr >&2; exit 3',
    ])
    expect(sub.code).toBe(0)
    const jobId = sub.stdout.trim()
    await client.wait(jobId, { timeoutMs: 30_000 })
    const [status, logs] = await Promise.all([cli(['status', jobId, '--json']), cli(['logs', jobId])])
    expect(status.code).toBe(0)
    const { job } = JSON.parse(status.stdout)
    expect(job).toMatchObject({ state: 'FAILED', exitCode: 3, error: 'task 0: exited with code 3' })
    expect(logs.stdout.split('\n').filter(Boolean).sort()).toEqual(['about to fail', 'on stderr'])
  }, 60_000)

  test('iris logs --follow streams output while the job runs', async () => {
    // The job prints, then waits for a file the test creates only after the follower saw the output.
    const gate = join(dir, 'gate')
    const jobId = await client.submit({
      name: 'chatty',
      resources: 'cpu=1,memory=64M',
      command: ['sh', '-c', `echo line-1; echo line-2; while [ ! -f ${gate} ]; do sleep 0.05; done; echo line-3`],
    })
    const follow = startIris(['logs', jobId, '--follow', '--controller', address], {
      logDir: dir,
      name: 'follow',
      env: { IRIS_TOKEN_FILE: tokenFile() },
    })
    procs.push(follow)
    await follow.waitFor(/line-2\n/)
    expect((await client.status(jobId)).state).toBe('RUNNING')
    expect(follow.child.exitCode).toBe(null)
    writeFileSync(gate, '')
    expect(await follow.exited).toBe(0)
    expect(follow.stdout()).toBe('line-1\nline-2\nline-3\n')
    expect((await client.status(jobId)).state).toBe('SUCCEEDED')
  }, 60_000)

  test('gpu=8 on cpu workers is UNSCHEDULABLE with the reason', async () => {
    const sub = await cli(['submit', '--job-name', 'greedy', '--resources', 'cpu=1,memory=1G,gpu=8', '--', 'true'])
    expect(sub.code).toBe(0)
    const job = await client.wait(sub.stdout.trim(), { timeoutMs: 30_000 })
    expect(job.state).toBe('UNSCHEDULABLE')
    expect(job.error).toMatch(/requests cpu=1,memory=1G,gpu=8 but no worker could ever fit it: .*gpu 8 > 0/)
  })

  test('bad --resources strings are refused with exit 2', async () => {
    const cases = [
      ['cpu=two', /cpu="two" must be a positive number/],
      ['memory=2Q', /memory="2Q" is not a byte size/],
      ['gpus=1', /unknown key "gpus"/],
    ] as const
    const results = await Promise.all(
      cases.map(([res]) => cli(['submit', '--job-name', 'bad', '--resources', res, '--', 'true'])),
    )
    results.forEach((r, i) => {
      expect(r.code).toBe(2)
      expect(r.stderr).toMatch(cases[i]![1])
    })
    expect((await client.list()).some((j) => j.name === 'bad')).toBe(false)
  }, 60_000)

  test('a worker killed with SIGKILL mid-task: its task is retried on the other worker', async () => {
    const jobId = await client.submit({
      name: 'survivor',
      resources: 'cpu=1,memory=64M',
      command: ['sh', '-c', `${marker()}; sleep 1.5`],
    })
    let first: string | undefined
    while (!first) {
      const j = await client.status(jobId)
      if (j.state === 'RUNNING') first = j.tasks[0]!.workerId
      else await new Promise((r) => setTimeout(r, 50))
    }
    const victim = workers.get(first)!
    victim.child.kill('SIGKILL')
    await victim.exited
    const job = await client.wait(jobId, { timeoutMs: 60_000 })
    expect(job.state).toBe('SUCCEEDED')
    const other = first === 'wa' ? 'wb' : 'wa'
    expect(job.tasks[0]).toMatchObject({ workerId: other, workerLosses: 1 })
    const attempts = await client.attempts(jobId)
    expect(attempts.map((a) => [a.workerId, a.state])).toEqual([
      [first, 'WORKER_FAILED'],
      [other, 'SUCCEEDED'],
    ])
    expect((await client.workers()).find((w) => w.workerId === first)!.state).toBe('LOST')
    await startWorker(first)
  }, 90_000)

  test('the controller killed and restarted mid-run: every job is accounted for', async () => {
    const ids = await Promise.all(
      Array.from({ length: 24 }, (_, i) =>
        client.submit({
          name: `restart${i}`,
          resources: 'cpu=1,memory=64M',
          command: ['sh', '-c', `${marker()}; sleep 0.5; echo done-$IRIS_JOB_ID`],
        }),
      ),
    )
    while ((await client.list({ states: ['RUNNING'] })).length === 0) await new Promise((r) => setTimeout(r, 50))
    controller.child.kill('SIGKILL')
    await controller.exited
    // Work goes on without the controller; the workers keep what they must report.
    await new Promise((r) => setTimeout(r, 700))
    controller = startController(port)
    await controller.waitFor(/listening on/)
    const jobs = await Promise.all(ids.map((id) => client.wait(id, { timeoutMs: 90_000 })))
    expect(jobs.map((j) => j.state)).toEqual(ids.map(() => 'SUCCEEDED'))
    for (const id of ids) {
      expect(marks(id)).toHaveLength(1)
      const out = await (async () => {
        const ls = []
        for await (const l of client.logs(id)) ls.push(l.line)
        return ls
      })()
      expect(out).toEqual([`done-${id}`])
    }
    expect(readdirSync(join(dir, 'marks')).length).toBeGreaterThanOrEqual(224)
  }, 120_000)
})
