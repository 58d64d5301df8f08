/**
 * @module The zephyr worker: a fray actor that runs tasks (one shard of one
 * stage) in its own process. The driver sends the stage plan with functions as
 * source text or module references (`portable.ts`, `user-fn.ts`); results and
 * failures come back as plain data so that a ZephyrError keeps its code across
 * the process boundary. It imports only what a task needs (readers and
 * writers load by format), so a worker starts quickly.
 */
import type { TaskCounters } from './counters.js'
import { isZephyrError } from './errors.js'
import type { ZephyrErrorCode } from './errors.js'
import { fromPortable } from './portable.js'
import { runTask } from './run-task.js'
import type { TaskEnv } from './run-task.js'

/** What a task sends back: its result, or its error as data. */
export type TaskOutcome =
  | { readonly ok: true; readonly counters: TaskCounters; readonly output?: string }
  | {
      readonly ok: false
      readonly name: string
      readonly message: string
      readonly code?: ZephyrErrorCode
      readonly retryable: boolean
    }

export class ZephyrWorker {
  constructor() {
    // lets error messages point at non-portable functions
    process.env.ZEPHYR_WORKER = '1'
  }

  /** Runs one shard of `stage` (a portable plan). */
  async runTask(stage: unknown, shard: number, env: TaskEnv): Promise<TaskOutcome> {
    try {
      const r = await runTask(fromPortable(stage), shard, env)
      return r.output === undefined
        ? { ok: true, counters: r.counters }
        : { ok: true, counters: r.counters, output: r.output }
    } catch (err) {
      const e = err instanceof Error ? err : new Error(String(err))
      if (isZephyrError(e)) return { ok: false, name: e.name, message: e.message, code: e.code, retryable: e.retryable }
      return { ok: false, name: e.name, message: e.message, retryable: true }
    }
  }

  /** The worker's process id (for tests and diagnostics). */
  pid(): number {
    return process.pid
  }
}
