import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, test } from 'vitest'
import { Controller } from './controller.js'
import { inProcessLink } from './controller-link.js'
import { resolveJobRequest, type JobRequest } from './job-spec.js'
import { Worker } from './worker.js'

let dir: string
let controller: Controller
let workers: Worker[]
const spec = (r: Partial<JobRequest> & { command: string[] }) => resolveJobRequest({ name: 'job', ...r })

async function startWorker(id: string, resources = { cpu: 2, memory: 4 * 2 ** 30, gpu: 0 }): Promise<Worker> {
  const w = new Worker({
    link: inProcessLink(controller),
    controllerAddress: 'in-process',
    workDir: join(dir, id),
    workerId: id,
    resources,
    retryDelayMs: 50,
    killGraceMs: 500,
  })
  await w.start()
  workers.push(w)
  return w
}

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'iris-ctl-'))
  controller = new Controller({ statePath: join(dir, 'iris.sqlite'), heartbeatMs: 200, workerTimeoutMs: 1500 })
  workers = []
})
afterEach(async () => {
  await Promise.all(workers.map((w) => w.stop()))
  controller.close()
  rmSync(dir, { recursive: true, force: true })
})

describe('controller with in-process workers', () => {
  test('runs replicas with the injected environment and keeps their output', async () => {
    await startWorker('w1')
    const id = controller.submit(
      spec({
        replicas: 3,
        resources: 'cpu=0.5',
        env: { GREETING: 'hi' },
        command: ['sh', '-c', 'echo "$GREETING $IRIS_JOB_ID $IRIS_TASK_INDEX/$IRIS_NUM_TASKS $IRIS_CONTROLLER"; pwd'],
      }),
    )
    const job = await controller.waitForJob(id)
    expect(job.state).toBe('SUCCEEDED')
    const lines = controller
      .readLogs(id)
      .filter((l) => l.stream === 'stdout')
      .map((l) => l.line)
    for (const i of [0, 1, 2]) expect(lines).toContain(`hi ${id} ${i}/3 in-process`)
    expect(lines).toContain(join(dir, 'w1', id, '0-1', 'work'))
  })

  test('exit 3 fails the job with code 3 and keeps its logs', async () => {
    await startWorker('w1')
    const id = controller.submit(spec({ command: ['sh', '-c', 'echo before-exit; echo err-line >&2; exit 3'] }))
    const job = await controller.waitForJob(id)
    expect(job).toMatchObject({ state: 'FAILED', exitCode: 3, error: 'task 0: exited with code 3' })
    expect(
      controller
        .readLogs(id)
        .map((l) => `${l.stream}:${l.line}`)
        .sort(),
    ).toEqual(['stderr:err-line', 'stdout:before-exit'])
  })

  test('retries a failing task within its budget', async () => {
    await startWorker('w1')
    const marker = join(dir, 'count')
    const id = controller.submit(
      spec({ maxRetriesFailure: 2, command: ['sh', '-c', `echo x >> ${marker}; [ $(wc -l < ${marker}) -ge 3 ]`] }),
    )
    const job = await controller.waitForJob(id)
    expect(job.state).toBe('SUCCEEDED')
    expect(job.tasks[0]).toMatchObject({ attempts: 3, failures: 2 })
  })

  test('kill stops a running task', async () => {
    await startWorker('w1')
    const id = controller.submit(spec({ command: ['sleep', '60'] }))
    while (controller.getJob(id).state !== 'RUNNING') await new Promise((r) => setTimeout(r, 20))
    expect(controller.kill(id)).toBe('KILLED')
    const job = await controller.waitForJob(id)
    expect(job.state).toBe('KILLED')
    while (controller.getAttempts(id)[0]!.state !== 'KILLED') await new Promise((r) => setTimeout(r, 20))
    expect(controller.getJob(id).tasks[0]!.state).toBe('KILLED')
  })

  test('gpu=8 on cpu workers is UNSCHEDULABLE with the reason', async () => {
    await startWorker('w1')
    const id = controller.submit(spec({ resources: 'cpu=1,memory=1G,gpu=8', command: ['true'] }))
    const job = await controller.waitForJob(id)
    expect(job.state).toBe('UNSCHEDULABLE')
    expect(job.error).toMatch(/gpu 8 > 0/)
  })

  test('a request that can never fit is UNSCHEDULABLE even far behind the head of the queue', async () => {
    await startWorker('w1', { cpu: 1, memory: 2 ** 30, gpu: 0 })
    const blocker = controller.submit(spec({ resources: 'cpu=1,memory=64M', command: ['sleep', '30'] }))
    while (controller.getJob(blocker).state !== 'RUNNING') await new Promise((r) => setTimeout(r, 20))
    for (let i = 0; i < 600; i++) controller.submit(spec({ resources: 'cpu=1,memory=64M', command: ['true'] }))
    const greedy = controller.submit(spec({ resources: 'cpu=1,memory=64M,gpu=8', command: ['true'] }))
    const job = await controller.waitForJob(greedy)
    expect(job.state).toBe('UNSCHEDULABLE')
    expect(controller.listJobs({ states: ['PENDING'] })).toHaveLength(600)
  })

  test('gpu tasks get their own devices in CUDA_VISIBLE_DEVICES', async () => {
    await startWorker('g', { cpu: 4, memory: 4 * 2 ** 30, gpu: 3 })
    const gate = join(dir, 'gate')
    const a = controller.submit(
      spec({
        resources: 'cpu=1,memory=64M,gpu=2',
        command: ['sh', '-c', `echo "$CUDA_VISIBLE_DEVICES"; while [ ! -f ${gate} ]; do sleep 0.05; done`],
      }),
    )
    const b = controller.submit(
      spec({
        resources: 'cpu=1,memory=64M,gpu=1',
        command: ['sh', '-c', `echo "$CUDA_VISIBLE_DEVICES"; while [ ! -f ${gate} ]; do sleep 0.05; done`],
      }),
    )
    while (controller.readLogs(a).length + controller.readLogs(b).length < 2)
      await new Promise((r) => setTimeout(r, 20))
    expect([controller.readLogs(a)[0]!.line, controller.readLogs(b)[0]!.line]).toEqual(['0,1', '2'])
    writeFileSync(gate, '')
    expect((await controller.waitForJob(a)).state).toBe('SUCCEEDED')
    await controller.waitForJob(b)
    const c = controller.submit(
      spec({ resources: 'cpu=1,memory=64M,gpu=3', command: ['sh', '-c', 'echo "$CUDA_VISIBLE_DEVICES"'] }),
    )
    await controller.waitForJob(c)
    expect(controller.readLogs(c)[0]!.line).toBe('0,1,2')
  })

  test('an image job is refused when no docker engine answers', async () => {
    const w = new Worker({
      link: inProcessLink(controller),
      controllerAddress: 'x',
      workDir: join(dir, 'wd'),
      workerId: 'nodocker',
      dockerBinary: '/nonexistent/docker',
      retryDelayMs: 50,
    })
    await w.start()
    workers.push(w)
    const id = controller.submit(spec({ image: 'python:3.12', command: ['python', '-V'] }))
    const job = await controller.waitForJob(id)
    expect(job.state).toBe('UNSCHEDULABLE')
    expect(job.error).toMatch(/needs a worker with a docker engine.*no "\/nonexistent\/docker" command/)
  })

  test('a worker that stops heartbeating loses its task to another worker', async () => {
    const w1 = await startWorker('w1', { cpu: 1, memory: 1 << 30, gpu: 0 })
    const id = controller.submit(
      spec({ command: ['sh', '-c', `echo $IRIS_WORKER_ID >> ${join(dir, 'ran')}; sleep 3`] }),
    )
    while (controller.getJob(id).state !== 'RUNNING') await new Promise((r) => setTimeout(r, 20))
    // Stop heartbeating without telling the controller, tasks left running.
    await w1.stop({ killTasks: false })
    await startWorker('w2', { cpu: 1, memory: 1 << 30, gpu: 0 })
    const job = await controller.waitForJob(id)
    expect(job.state).toBe('SUCCEEDED')
    expect(job.tasks[0]).toMatchObject({ workerId: 'w2', workerLosses: 1 })
    expect(controller.getAttempts(id).map((a) => a.state)).toEqual(['WORKER_FAILED', 'SUCCEEDED'])
    expect(readFileSync(join(dir, 'ran'), 'utf8')).toContain('w2')
  })

  test('a worker that shuts down hands its running task to another worker', async () => {
    const w1 = await startWorker('w1', { cpu: 1, memory: 2 ** 30, gpu: 0 })
    const id = controller.submit(spec({ command: ['sh', '-c', 'sleep 0.5; echo finished on $IRIS_WORKER_ID'] }))
    while (controller.getJob(id).state !== 'RUNNING') await new Promise((r) => setTimeout(r, 20))
    await w1.stop()
    await startWorker('w2', { cpu: 1, memory: 2 ** 30, gpu: 0 })
    const job = await controller.waitForJob(id)
    expect(job.state).toBe('SUCCEEDED')
    expect(controller.getAttempts(id).map((a) => [a.workerId, a.state])).toEqual([
      ['w1', 'WORKER_FAILED'],
      ['w2', 'SUCCEEDED'],
    ])
    expect(controller.readLogs(id).map((l) => l.line)).toEqual(['finished on w2'])
  })

  test('cleanup removes finished attempt directories after the TTL', async () => {
    const w = await startWorker('w1')
    const id = controller.submit(spec({ command: ['true'] }))
    await controller.waitForJob(id)
    await new Promise((r) => setTimeout(r, 50))
    expect(w.cleanup(60_000)).toBe(0)
    expect(w.cleanup(0)).toBe(1)
  })
})
