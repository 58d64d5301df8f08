/**
 * @module `ZephyrContext`: runs a Dataset on fray workers. As in Python
 * zephyr, the client defaults to fray's current client, which on one machine
 * is a `LocalClient` whose actors are worker processes: stages run in
 * parallel on the machine's cores. Functions reach the workers as source
 * text, bound `args` or module references (`user-fn.ts`); `inProcess: true`
 * runs tasks in this process instead, where closures work, for tests,
 * debugging and data too small to be worth starting a process.
 *
 * @example
 * const ctx = new ZephyrContext({ maxWorkers: 4, memoryBudget: 256 * 2 ** 20 })
 * const { outputs, counters } = await ctx.execute(ds)
 * await ctx.close()
 */
import { availableParallelism } from 'node:os'
import { resolve } from 'node:path'
import type { Client, ResourcesInput } from '@marin/fray'
import { logger } from '@marin/rigging'
import type { FrayRunner } from './fray-runner.js'
import type { Dataset } from './dataset.js'
import { executeStages } from './executor.js'
import type { ExecuteOptions, ExecuteResult, TaskRunner } from './executor.js'
import { planStages } from './plan.js'
import type { StagePlan } from './plan.js'
import { runTask } from './run-task.js'
import { resolveStage } from './resolve-stage.js'
import type { Op } from './ops.js'
import { ZephyrError } from './errors.js'
import { memoryUrl } from './internal/memory-url.js'
import { checkOptions, ContextOptionsSchema, ExecuteOptionsSchema } from './options.js'

const log = logger('zephyr')

export type ZephyrContextOptions = ExecuteOptions & {
  /**
   * The fray client whose actors run the tasks.
   * @default fray's `currentClient()`: worker processes on this machine unless `withClient`/`setDefaultClient` chose
   * another
   */
  readonly client?: Client
  /**
   * Worker actors at most, started as tasks need them; with `inProcess`, tasks in flight.
   * @default os.availableParallelism() on workers, 1 in process
   */
  readonly maxWorkers?: number
  /** Run tasks in this process (closures allowed, no worker startup). @default false */
  readonly inProcess?: boolean
  /**
   * What each worker actor holds (fray resources: cpu, memory). A worker with one core runs V8's
   * garbage collector on its own thread, so workers filling the machine do not compete for GC helpers.
   * @default fray's default, `{ cpu: 1, memory: '1Gi' }`
   */
  readonly workerResources?: ResourcesInput
}

/** A plain local path becomes absolute, so every process resolves it the same way. */
function absolutePattern(pattern: string): string {
  return /^[a-z][a-z0-9+.-]*:\/\//i.test(pattern) ? pattern : resolve(pattern)
}

export function normalizeOps(ops: readonly Op[]): Op[] {
  return ops.map((op) =>
    op.kind === 'write' ? { ...op, writer: { ...op.writer, pattern: absolutePattern(op.writer.pattern) } } : op,
  )
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
    if (options.inProcess && options.client)
      throw new ZephyrError(
        'INVALID_PLAN',
        'ZephyrContext: inProcess runs tasks in this process, so a client has no use; pass one or the other',
      )
    this.options = options
  }

  /** The fray worker pool (undefined in process); workers start on demand and stay until `close()`. */
  workers(): Promise<FrayRunner> | undefined {
    if (this.options.inProcess) return undefined
    const client = this.options.client
    // fray's worker machinery loads only when a context runs on workers
    this.runner ??= import('./fray-runner.js').then((m) =>
      m.frayRunner(client, this.options.maxWorkers ?? availableParallelism(), this.options.workerResources),
    )
    this.runner.catch(() => (this.runner = undefined))
    return this.runner
  }

  /** Stops the worker processes (a no-op in process). Idle workers never keep Node alive, but close frees them. */
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
    // module references are imported here first, so a bad one fails before any worker starts
    await Promise.all(stages.map(resolveStage))
    const memory = memoryUrl(stages, opts.scratch)
    if (memory && !this.options.inProcess)
      log.info({ url: memory }, 'memory:// storage lives in this process only: running the plan in process')
    const runner = (memory ? undefined : await this.workers()) ?? inProcessRunner(opts.maxWorkers ?? 1)
    return executeStages<T>(stages, runner, opts)
  }
}
