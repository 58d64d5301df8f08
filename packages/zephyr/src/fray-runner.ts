/**
 * @module Runs tasks on a group of fray worker actors (worker processes with
 * the local client). Each task goes to an idle worker; a worker that dies
 * mid-task is restarted by fray, and the executor retries the task.
 */
import type { ActorGroup, ActorHandle, Client } from '@marin/fray'
import { ZephyrError } from './errors.js'
import type { TaskRunner } from './executor.js'
import type { StagePlan } from './plan.js'
import { toPortable } from './portable.js'
import type { TaskEnv, TaskResult } from './run-task.js'
import { ZephyrWorkerClass } from './worker.js'
import type { ZephyrWorker } from './worker.js'

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

export async function frayRunner(client: Client, workers: number): Promise<FrayRunner> {
  const group: ActorGroup<ZephyrWorker> = await client.createActorGroup(ZephyrWorkerClass, workers, [], { name: 'zephyr-worker', maxRestarts: 1000 })
  await group.waitReady()
  const idle: ActorHandle<ZephyrWorker>[] = [...group.members]
  const waiting: ((w: ActorHandle<ZephyrWorker>) => void)[] = []
  const portable = new WeakMap<StagePlan, unknown>()

  const acquire = () =>
    new Promise<ActorHandle<ZephyrWorker>>((resolve) => {
      const w = idle.shift()
      if (w) resolve(w)
      else waiting.push(resolve)
    })
  const release = (w: ActorHandle<ZephyrWorker>) => {
    const next = waiting.shift()
    if (next) next(w)
    else idle.push(w)
  }

  return {
    concurrency: workers,
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
    pids: () => group.members.map((m) => m.$actor.pid()),
    async close() {
      await Promise.all(group.members.map((m) => m.$actor.stop().catch(() => {})))
    },
  }
}
