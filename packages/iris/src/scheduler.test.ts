import { describe, expect, test } from 'vitest'
import { parseResources } from './resources.js'
import { schedule, type PendingTask, type WorkerView } from './scheduler.js'
import type { Priority } from './states.js'

const R = (s: string) => parseResources(s)
let seq = 0
const task = (
  jobId: string,
  res = 'cpu=1,memory=1G,gpu=0',
  priority: Priority = 'batch',
  extra: Partial<PendingTask> = {},
): PendingTask => ({
  jobId,
  taskIndex: 0,
  priority,
  submitSeq: ++seq,
  resources: R(res),
  needsDocker: false,
  ...extra,
})
const worker = (workerId: string, total: string, free = total, docker = false): WorkerView => ({
  workerId,
  total: R(total),
  free: R(free),
  docker,
})

describe('schedule', () => {
  test('production before interactive before batch, FIFO inside a band', () => {
    const pending = [
      task('b1', undefined, 'batch'),
      task('i1', undefined, 'interactive'),
      task('p1', undefined, 'production'),
      task('b2', undefined, 'batch'),
      task('p2', undefined, 'production'),
    ]
    const d = schedule({ pending, workers: [worker('w', 'cpu=3,memory=8G,gpu=0')] })
    expect(d.assign.map((a) => a.jobId)).toEqual(['p1', 'p2', 'i1'])
    expect(d.unschedulable).toEqual([])
  })

  test('order of the input does not matter, only band and submit sequence', () => {
    const a = task('a'),
      b = task('b'),
      c = task('c', undefined, 'interactive')
    const w = [worker('w', 'cpu=2,memory=8G,gpu=0')]
    expect(schedule({ pending: [b, c, a], workers: w }).assign.map((x) => x.jobId)).toEqual(['c', 'a'])
  })

  test('replicas of one job go in task-index order', () => {
    const pending = [2, 0, 1].map((i) => task('j', undefined, 'batch', { taskIndex: i, submitSeq: 7 }))
    const d = schedule({ pending, workers: [worker('w', 'cpu=2,memory=8G,gpu=0')] })
    expect(d.assign.map((a) => a.taskIndex)).toEqual([0, 1])
  })

  test('an impossible request is UNSCHEDULABLE with the reason', () => {
    const d = schedule({
      pending: [task('big', 'cpu=1,memory=1G,gpu=8')],
      workers: [worker('w1', 'cpu=4,memory=8G,gpu=0'), worker('w2', 'cpu=2,memory=4G,gpu=0')],
    })
    expect(d.assign).toEqual([])
    expect(d.unschedulable).toHaveLength(1)
    expect(d.unschedulable[0]!.reason).toMatch(/no worker could ever fit it.*gpu 8 > 0/)
  })

  test('a request that fits a busy worker waits instead of being unschedulable', () => {
    const d = schedule({
      pending: [task('x', 'cpu=4,memory=1G,gpu=0')],
      workers: [worker('w', 'cpu=4,memory=8G,gpu=0', 'cpu=1,memory=8G,gpu=0')],
    })
    expect(d).toEqual({ assign: [], unschedulable: [] })
  })

  test('with no worker at all, tasks wait', () => {
    expect(schedule({ pending: [task('x', 'gpu=8')], workers: [] })).toEqual({ assign: [], unschedulable: [] })
  })

  test('images need a docker worker; without one the reason says so', () => {
    const t = task('img', undefined, 'batch', { needsDocker: true })
    const d = schedule({
      pending: [t],
      workers: [{ ...worker('w', 'cpu=2,memory=2G,gpu=0'), dockerReason: 'docker engine did not answer' }],
    })
    expect(d.unschedulable[0]!.reason).toMatch(/docker engine did not answer/)
    const d2 = schedule({
      pending: [t],
      workers: [worker('w', 'cpu=2,memory=2G,gpu=0'), worker('d', 'cpu=2,memory=2G,gpu=0', undefined, true)],
    })
    expect(d2.assign).toEqual([{ jobId: 'img', taskIndex: 0, workerId: 'd' }])
  })

  test('free capacity is used up within one pass', () => {
    const pending = [task('a', 'cpu=1.5,memory=1G'), task('b', 'cpu=1.5,memory=1G'), task('c', 'cpu=0.5,memory=1G')]
    const d = schedule({ pending, workers: [worker('w', 'cpu=2,memory=8G,gpu=0')] })
    // b cannot fit, and it reserves w so that c does not jump ahead of it.
    expect(d.assign.map((a) => a.jobId)).toEqual(['a'])
  })

  test('a blocked task reserves only the workers that could hold it', () => {
    const pending = [task('gpu', 'cpu=1,memory=1G,gpu=1'), task('cpu', 'cpu=1,memory=1G,gpu=0')]
    const workers = [
      worker('g', 'cpu=4,memory=8G,gpu=1', 'cpu=4,memory=8G,gpu=0'),
      worker('c', 'cpu=4,memory=8G,gpu=0'),
    ]
    expect(schedule({ pending, workers }).assign).toEqual([{ jobId: 'cpu', taskIndex: 0, workerId: 'c' }])
  })

  test('spreads over the least loaded worker', () => {
    const pending = [task('a'), task('b'), task('c'), task('d')]
    const d = schedule({
      pending,
      workers: [worker('w1', 'cpu=2,memory=8G,gpu=0'), worker('w2', 'cpu=2,memory=8G,gpu=0')],
    })
    expect(d.assign.map((a) => a.workerId)).toEqual(['w1', 'w2', 'w1', 'w2'])
  })

  test('memory and fractional cpu are honoured', () => {
    const pending = [task('a', 'cpu=0.1,memory=3G'), task('b', 'cpu=0.2,memory=1G'), task('c', 'cpu=0.7,memory=1G')]
    const d = schedule({ pending, workers: [worker('w', 'cpu=1,memory=4G,gpu=0')] })
    expect(d.assign.map((a) => a.jobId)).toEqual(['a', 'b'])
  })
})
