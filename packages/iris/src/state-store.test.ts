import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, test } from 'vitest'
import { resolveJobRequest } from './job-spec.js'
import { StateStore } from './state-store.js'

let dir: string
let store: StateStore
const spec = (over: Parameters<typeof resolveJobRequest>[0] extends infer R ? Partial<R> : never = {}) =>
  resolveJobRequest({ name: 'job', command: ['true'], ...over })
const worker = { workerId: 'w1', address: 'local', resources: { cpu: 4, memory: 8 * 2 ** 30, gpu: 0 }, docker: false }

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'iris-store-'))
  store = new StateStore(join(dir, 'iris.sqlite'))
  store.upsertWorker(worker)
})
afterEach(() => {
  store.close()
  rmSync(dir, { recursive: true, force: true })
})

describe('StateStore', () => {
  test('a job with replicas runs through to SUCCEEDED', () => {
    const id = store.insertJob(spec({ replicas: 2 }))
    expect(store.getJob(id)).toMatchObject({ state: 'PENDING', tasks: [{ state: 'PENDING' }, { state: 'PENDING' }] })
    const a0 = store.assign(id, 0, 'w1')!
    const a1 = store.assign(id, 1, 'w1')!
    expect(store.assign(id, 0, 'w1')).toBeUndefined()
    expect(store.markRunning(a0.attemptId)).toBe(true)
    expect(store.getJob(id).state).toBe('RUNNING')
    store.markRunning(a1.attemptId)
    store.finishAttempt(a0.attemptId, 'SUCCEEDED', { exitCode: 0 })
    expect(store.getJob(id).state).toBe('RUNNING')
    const t = store.finishAttempt(a1.attemptId, 'SUCCEEDED', { exitCode: 0 })!
    expect(t.jobState).toBe('SUCCEEDED')
    expect(store.getJob(id)).toMatchObject({ state: 'SUCCEEDED', exitCode: 0 })
    // Reports arriving twice change nothing.
    expect(store.finishAttempt(a1.attemptId, 'FAILED', { exitCode: 1 })).toBeUndefined()
  })

  test('a failure fails the job with its exit code and kills the other tasks', () => {
    const id = store.insertJob(spec({ replicas: 2 }))
    const a0 = store.assign(id, 0, 'w1')!
    const a1 = store.assign(id, 1, 'w1')!
    store.markRunning(a0.attemptId)
    store.markRunning(a1.attemptId)
    const t = store.finishAttempt(a0.attemptId, 'FAILED', { exitCode: 3, error: 'exited with code 3' })!
    expect(t.jobState).toBe('FAILED')
    expect(t.killAttempts.map((a) => a.attemptId)).toEqual([a1.attemptId])
    expect(store.getJob(id)).toMatchObject({ state: 'FAILED', exitCode: 3, error: 'task 0: exited with code 3' })
  })

  test('failure and worker-loss budgets are separate', () => {
    const id = store.insertJob(spec({ maxRetriesFailure: 1, maxRetriesWorker: 1 }))
    let a = store.assign(id, 0, 'w1')!
    store.finishAttempt(a.attemptId, 'WORKER_FAILED', { error: 'worker lost' })
    expect(store.getJob(id).tasks[0]).toMatchObject({ state: 'PENDING', workerLosses: 1 })
    a = store.assign(id, 0, 'w1')!
    store.finishAttempt(a.attemptId, 'FAILED', { exitCode: 1 })
    expect(store.getJob(id).tasks[0]).toMatchObject({ state: 'PENDING', failures: 1 })
    a = store.assign(id, 0, 'w1')!
    expect(a.attempt).toBe(3)
    store.finishAttempt(a.attemptId, 'WORKER_FAILED', { error: 'worker lost again' })
    expect(store.getJob(id)).toMatchObject({
      state: 'FAILED',
      error: 'task 0: worker lost again',
      tasks: [{ state: 'WORKER_FAILED' }],
    })
    expect(store.attemptsOf(id).map((x) => x.state)).toEqual(['WORKER_FAILED', 'FAILED', 'WORKER_FAILED'])
  })

  test('a lost worker hands its attempts back', () => {
    const id = store.insertJob(spec())
    const a = store.assign(id, 0, 'w1')!
    store.markRunning(a.attemptId)
    store.markWorkerLost('w1', 'no heartbeat for 3s')
    expect(store.getJob(id).tasks[0]).toMatchObject({ state: 'PENDING', workerLosses: 1 })
    expect(store.listWorkers('LOST').map((w) => w.workerId)).toEqual(['w1'])
  })

  test('kill: pending tasks at once, running attempts returned to stop', () => {
    const id = store.insertJob(spec({ replicas: 2 }))
    const a = store.assign(id, 0, 'w1')!
    const t = store.killJob(id)
    expect(t.jobState).toBe('KILLED')
    expect(t.killAttempts.map((x) => x.attemptId)).toEqual([a.attemptId])
    expect(store.getJob(id).tasks.map((x) => x.state)).toEqual(['ASSIGNED', 'KILLED'])
    store.finishAttempt(a.attemptId, 'KILLED', { error: 'killed' })
    expect(store.getJob(id).tasks.map((x) => x.state)).toEqual(['KILLED', 'KILLED'])
  })

  test('a task killed on its worker while its job lives is a worker loss, retried', () => {
    const id = store.insertJob(spec())
    const a = store.assign(id, 0, 'w1')!
    store.markRunning(a.attemptId)
    store.finishAttempt(a.attemptId, 'KILLED', { error: 'worker w1 shut down while the task ran' })
    expect(store.getJob(id)).toMatchObject({ state: 'RUNNING', tasks: [{ state: 'PENDING', workerLosses: 1 }] })
    expect(store.attemptsOf(id)[0]).toMatchObject({
      state: 'WORKER_FAILED',
      error: 'worker w1 shut down while the task ran',
    })
  })

  test('unschedulable tasks make the job UNSCHEDULABLE with the reason', () => {
    const id = store.insertJob(spec())
    store.markUnschedulable(id, 0, 'needs gpu 8')
    expect(store.getJob(id)).toMatchObject({ state: 'UNSCHEDULABLE', error: 'task 0: needs gpu 8' })
  })

  test('state survives reopening the file', () => {
    const id = store.insertJob(spec({ replicas: 3 }))
    store.assign(id, 0, 'w1')
    expect(
      store.appendLogs([{ jobId: id, taskIndex: 0, attempt: 1, lineNo: 0, stream: 'stdout', ts: 5, line: 'hello' }]),
    ).toBe(1)
    expect(
      store.appendLogs([{ jobId: id, taskIndex: 0, attempt: 1, lineNo: 0, stream: 'stdout', ts: 5, line: 'hello' }]),
    ).toBe(0)
    store.close()
    store = new StateStore(join(dir, 'iris.sqlite'))
    expect(store.getJob(id).tasks.map((t) => t.state)).toEqual(['ASSIGNED', 'PENDING', 'PENDING'])
    expect(store.pendingTasks().map((t) => t.taskIndex)).toEqual([1, 2])
    expect(store.readLogs(id).map((l) => l.line)).toEqual(['hello'])
    expect(store.db.pragma('journal_mode', { simple: true })).toBe('wal')
  })

  test('logs filter by sequence, time and task', () => {
    const id = store.insertJob(spec({ replicas: 2 }))
    store.appendLogs([
      { jobId: id, taskIndex: 0, attempt: 1, lineNo: 0, stream: 'stdout', ts: 10, line: 'a' },
      { jobId: id, taskIndex: 1, attempt: 1, lineNo: 0, stream: 'stderr', ts: 20, line: 'b' },
      { jobId: id, taskIndex: 0, attempt: 1, lineNo: 1, stream: 'stdout', ts: 30, line: 'c' },
    ])
    const all = store.readLogs(id)
    expect(all.map((l) => l.line)).toEqual(['a', 'b', 'c'])
    expect(store.readLogs(id, { afterSeq: all[0]!.seq }).map((l) => l.line)).toEqual(['b', 'c'])
    expect(store.readLogs(id, { sinceTs: 20 }).map((l) => l.line)).toEqual(['b', 'c'])
    expect(store.readLogs(id, { taskIndex: 0 }).map((l) => l.line)).toEqual(['a', 'c'])
  })

  test('unknown job is a typed error', () => {
    expect(() => store.getJob('nope')).toThrow(/job "nope" does not exist/)
  })
})
