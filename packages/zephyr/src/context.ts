/**
 * @module `ZephyrContext`: runs a Dataset. In this process by default, or on
 * fray worker processes when given a fray client.
 *
 * @example
 * const ctx = new ZephyrContext({ client: new LocalClient(), maxWorkers: 4, memoryBudget: 256 * 2 ** 20 })
 * const { outputs, counters } = await ctx.execute(ds)
 */
import { resolve } from 'node:path'
import type { Client } from '@marin/fray'
import type { FrayRunner } from './fray-runner.js'
import type { Dataset } from './dataset.js'
import { executeStages } from './executor.js'
import type { ExecuteOptions, ExecuteResult, TaskRunner } from './executor.js'
import { planStages } from './plan.js'
import type { StagePlan } from './plan.js'
import { runTask } from './run-task.js'
import type { Op } from './ops.js'
import { checkOptions, ContextOptionsSchema, ExecuteOptionsSchema } from './options.js'

export type ZephyrContextOptions = ExecuteOptions & {
  /**
   * A fray client: tasks run on `maxWorkers` worker actors it creates (worker
   * processes with `LocalClient`). Without one, tasks run in this process.
   */
  readonly client?: Client
  /** Worker actors (with a client), or tasks in flight in this process. @default 1 */
  readonly maxWorkers?: number
}

/** A plain local path becomes absolute, so every process resolves it the same way. */
function absolutePattern(pattern: string): string {
  return /^[a-z][a-z0-9+.-]*:\/\//i.test(pattern) ? pattern : resolve(pattern)
}

export function normalizeOps(ops: readonly Op[]): Op[] {
  return ops.map((op) => (op.kind === 'write' ? { ...op, writer: { ...op.writer, pattern: absolutePattern(op.writer.pattern) } } : op))
}

/** Runs tasks in this process. */
export function inProcessRunner(concurrency: number): TaskRunner {
  return { concurrency, run: (stage, shard, env) => runTask(stage, shard, env) }
}

export class ZephyrContext {
  private runner: Promise<FrayRunner> | undefined

  readonly options: ZephyrContextOptions

  constructor(options: ZephyrContextOptions = {}) {
    checkOptions(ContextOptionsSchema, options, 'ZephyrContext')
    this.options = options
  }

  /** The fray workers, started on first use and kept until `close()`. */
  workers(): Promise<FrayRunner> | undefined {
    if (!this.options.client) return undefined
    const client = this.options.client
    // fray's worker machinery loads only when a context runs on workers
    this.runner ??= import('./fray-runner.js').then((m) => m.frayRunner(client, this.options.maxWorkers ?? 1))
    this.runner.catch(() => (this.runner = undefined))
    return this.runner
  }

  /** Stops the worker actors (a no-op in process). */
  async close(): Promise<void> {
    const r = this.runner
    this.runner = undefined
    if (r) await (await r).close()
  }

  /** Plans the stages of a dataset (globs expanded) without running them. */
  async plan<T>(ds: Dataset<T>): Promise<StagePlan[]> {
    return planStages(ds.source, normalizeOps(ds.ops))
  }

  /** Runs the dataset; returns outputs (writers) or records, and counters per stage. */
  async execute<T>(ds: Dataset<T>, overrides: ExecuteOptions = {}): Promise<ExecuteResult<T>> {
    checkOptions(ExecuteOptionsSchema, overrides, 'ZephyrContext.execute')
    const opts = { ...this.options, ...overrides }
    const stages = await this.plan(ds)
    const runner = (await this.workers()) ?? inProcessRunner(opts.maxWorkers ?? 1)
    return executeStages<T>(stages, runner, opts)
  }
}
