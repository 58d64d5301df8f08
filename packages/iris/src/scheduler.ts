/**
 * @module The scheduler: a pure function from a cluster snapshot to assignments.
 *
 * Policy, in order:
 * - priority bands: every production task is considered before any interactive
 *   one, and interactive before batch;
 * - FIFO inside a band (by submit sequence, then task index);
 * - a task that no live worker could ever hold (by total capacity or missing
 *   capability) is UNSCHEDULABLE, with the reason; with no worker at all it waits;
 * - a task that could run but does not fit right now reserves the workers that
 *   could hold it for the rest of the pass, so later, smaller tasks cannot starve
 *   it on those workers while still using the others;
 * - among free workers the least loaded (most free cpu) wins, which spreads work.
 */
import { fits, formatResources, shortfall, subtractResources, type Resources } from './resources.js'
import { PRIORITIES, type Priority } from './states.js'

export type PendingTask = {
  readonly jobId: string
  readonly taskIndex: number
  readonly priority: Priority
  /** Order of submission; lower runs first inside a band. */
  readonly submitSeq: number
  readonly resources: Resources
  /** The task runs in a container image, so it needs a worker with a docker engine. */
  readonly needsDocker: boolean
}

export type WorkerView = {
  readonly workerId: string
  readonly total: Resources
  readonly free: Resources
  readonly docker: boolean
  /** Why the worker cannot run images, shown in UNSCHEDULABLE reasons. */
  readonly dockerReason?: string
}

export type ClusterSnapshot = { readonly pending: readonly PendingTask[]; readonly workers: readonly WorkerView[] }

export type Assignment = { readonly jobId: string; readonly taskIndex: number; readonly workerId: string }
export type Unschedulable = { readonly jobId: string; readonly taskIndex: number; readonly reason: string }
export type Decision = { readonly assign: readonly Assignment[]; readonly unschedulable: readonly Unschedulable[] }

const BAND: Record<Priority, number> = Object.fromEntries(PRIORITIES.map((p, i) => [p, i])) as Record<Priority, number>

/** Orders tasks the way the scheduler considers them. */
export function compareTasks(a: PendingTask, b: PendingTask): number {
  return BAND[a.priority] - BAND[b.priority] || a.submitSeq - b.submitSeq || a.taskIndex - b.taskIndex
}

/** Why no worker could ever hold `task`, or undefined when one could. */
export function neverFitsReason(task: PendingTask, workers: readonly WorkerView[]): string | undefined {
  if (workers.length === 0) return undefined
  const capable = task.needsDocker ? workers.filter((w) => w.docker) : workers
  if (capable.length === 0) {
    const why = workers.find((w) => w.dockerReason)?.dockerReason ?? 'no docker engine answers on any worker'
    return (
      `the job has an image, which needs a worker with a docker ` +
      `engine; none of ${workers.length} worker(s) has one (${why}); ` +
      `drop --image or start a worker where docker works`
    )
  }
  if (capable.some((w) => fits(task.resources, w.total))) return undefined
  const best = [...capable].sort(
    (a, b) => shortfall(task.resources, a.total).length - shortfall(task.resources, b.total).length,
  )[0]!
  return (
    `requests ${formatResources(task.resources)} but no worker could ` +
    `ever fit it: the closest, ${best.workerId} (` +
    `${formatResources(best.total)}), falls short on ` +
    `${shortfall(task.resources, best.total).join(', ')}; lower ` +
    `--resources or add a bigger worker`
  )
}

/** Decides which pending tasks go to which workers. Pure: the caller does the I/O. */
export function schedule(snapshot: ClusterSnapshot): Decision {
  const free = new Map<string, Resources>(snapshot.workers.map((w) => [w.workerId, w.free]))
  const reserved = new Set<string>()
  const assign: Assignment[] = []
  const unschedulable: Unschedulable[] = []
  for (const task of [...snapshot.pending].sort(compareTasks)) {
    const reason = neverFitsReason(task, snapshot.workers)
    if (reason !== undefined) {
      unschedulable.push({ jobId: task.jobId, taskIndex: task.taskIndex, reason })
      continue
    }
    // Once every worker is taken or reserved, later tasks are only checked for fit-ever.
    if (reserved.size === snapshot.workers.length) continue
    const eligible = snapshot.workers.filter((w) => (!task.needsDocker || w.docker) && fits(task.resources, w.total))
    let best: WorkerView | undefined
    for (const w of eligible) {
      if (reserved.has(w.workerId)) continue
      const f = free.get(w.workerId)!
      if (!fits(task.resources, f)) continue
      if (
        !best ||
        f.cpu > free.get(best.workerId)!.cpu ||
        (f.cpu === free.get(best.workerId)!.cpu && w.workerId < best.workerId)
      )
        best = w
    }
    if (best) {
      free.set(best.workerId, subtractResources(free.get(best.workerId)!, task.resources))
      assign.push({ jobId: task.jobId, taskIndex: task.taskIndex, workerId: best.workerId })
    } else {
      for (const w of eligible) reserved.add(w.workerId)
    }
  }
  return { assign, unschedulable }
}
