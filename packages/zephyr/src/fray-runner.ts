/**
 * @module Runs tasks on fray worker actors (worker processes with the local
 * client). Workers start as tasks need them, up to `maxWorkers`, so a plan
 * with one shard starts one process; they stay for the next `execute` until
 * `close()`. Each task goes to an idle worker; a worker that dies mid-task is
 * restarted by fray, and the executor retries the task.
 */
import { actorClass, currentClient, resources } from '@marin/fray'
import type { ActorClassRef, ActorHandle, Client, ResourcesInput } from '@marin/fray'
import { ZephyrError } from './errors.js'
import type { TaskRunner } from './executor.js'
import type { StagePlan } from './plan.js'
import { toPortable } from './portable.js'
import type { TaskEnv, TaskResult } from './run-task.js'
import type { ZephyrWorker } from './worker.js'

/** Where fray finds the worker class (the worker module itself never loads fray's index). */
export const ZephyrWorkerClass: ActorClassRef<typeof ZephyrWorker> = actorClass<typeof ZephyrWorker>(
  new URL('./worker.ts', import.meta.url),
  'ZephyrWorker',
)

export type FrayRunner = TaskRunner & {
  /** The worker processes' ids (undefined for a worker that is restarting). */
  pids(): (number | undefined)[]
  close(): Promise<void>
}

/** Only shard `i`'s items of a list input travel with task `i`. */
function sliceForShard(portable: unknown, stage: StagePlan, shard: number): unknown {
  if (stage.input.kind !== 'list') return portable
  const shards = new Array<unknown>(stage.input.shards.length).fill([])
  shards[shard] = stage.input.shards[shard]
  return { ...(portable as object), input: { kind: 'list', shards } }
}

export async function frayRunner(
  clientOption: Client | undefined,
  maxWorkers: number,
  workerResources?: ResourcesInput,
): Promise<FrayRunner> {
  if (workerResources) resources(workerResources) // a bad field fails here, naming it, before any worker starts
  const client = clientOption ?? currentClient()
  const members: ActorHandle<ZephyrWorker>[] = []
  const idle: ActorHandle<ZephyrWorker>[] = []
  const waiting: ((w: ActorHandle<ZephyrWorker>) => void)[] = []
  const portable = new WeakMap<StagePlan, unknown>()
  let starting = 0
  let closed = false

  const release = (w: ActorHandle<ZephyrWorker>) => {
    const next = waiting.shift()
    if (next) next(w)
    else idle.push(w)
  }
  const acquire = async (): Promise<ActorHandle<ZephyrWorker>> => {
    const w = idle.shift()
    if (w) return w
    if (members.length + starting < maxWorkers) {
      starting++
      try {
        const h = await client.createActor(ZephyrWorkerClass, [], {
          name: `zephyr-worker-${members.length + starting - 1}`,
          maxRestarts: 1000,
          ...(workerResources ? { resources: workerResources } : {}),
        })
        members.push(h)
        if (closed) await h.$actor.stop().catch(() => {})
        return h
      } finally {
        starting--
      }
    }
    return new Promise((resolve) => waiting.push(resolve))
  }

  return {
    concurrency: maxWorkers,
    remote: true,
    async run(stage: StagePlan, shard: number, env: TaskEnv): Promise<TaskResult> {
      let p = portable.get(stage)
      if (p === undefined) {
        p = toPortable(stage)
        portable.set(stage, p)
      }
      const w = await acquire()
      try {
        const out = await w.runTask(sliceForShard(p, stage, shard), shard, env)
        if (!out.ok) {
          if (out.code) throw new ZephyrError(out.code, out.message, out.retryable)
          throw Object.assign(new Error(`${out.name}: ${out.message}`), { name: out.name })
        }
        return out.output === undefined ? { counters: out.counters } : { counters: out.counters, output: out.output }
      } finally {
        release(w)
      }
    },
    pids: () => members.map((m) => m.$actor.pid()),
    async close() {
      closed = true
      await Promise.all(members.map((m) => m.$actor.stop().catch(() => {})))
    },
  }
}
