/**
 * @module Drives the stages of a plan: one stage at a time, its shards as
 * tasks on a runner (in process, or on fray workers), with retries, resume and
 * per-stage counters. Every decision about what to run lives here; runners only
 * run tasks.
 */
import { createHash, randomBytes } from 'node:crypto'
import { rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { serialize } from 'node:v8'
import { logger } from '@marin/rigging'
import { addTaskCounters, emptyTaskCounters } from './counters.js'
import type { StageCounters } from './counters.js'
import { isZephyrError, ZephyrError } from './errors.js'
import { decodeFrames, FrameEncoder } from './internal/frames.js'
import { openOutput } from './internal/output.js'
import { locate, splitUrl } from './internal/location.js'
import type { StagePlan } from './plan.js'
import { StageProgress } from './progress.js'
import type { ProgressMode } from './progress.js'
import { committedAttempts, outputUrl, scratchPaths } from './run-task.js'
import type { TaskEnv, TaskResult } from './run-task.js'

const log = logger('zephyr')

/** Runs tasks somewhere. `concurrency` tasks may be in flight at once. */
export type TaskRunner = {
  readonly concurrency: number
  /** Tasks run in other processes: in-memory sources must be written to scratch first. */
  readonly remote?: boolean
  run(stage: StagePlan, shard: number, env: TaskEnv): Promise<TaskResult>
}

export type ExecuteOptions = {
  /** Keep output shards that already exist and run only the missing ones. @default false */
  readonly skipExisting?: boolean
  /** Replace existing outputs. Without this or `skipExisting`, an existing output is an error. @default false */
  readonly overwrite?: boolean
  /** Where shuffle buckets go. @default next to the outputs (`.zephyr-scratch-<plan hash>`), or a temp folder */
  readonly scratch?: string
  /** Bytes one groupBy/deduplicate task may hold before spilling to disk. @default 512 MiB */
  readonly memoryBudget?: number
  /** Attempts per task before the run fails. @default 3 */
  readonly maxAttempts?: number
  /** @default 'auto' (a bar on a terminal, log lines otherwise) */
  readonly progress?: ProgressMode
  /** Local folder for spill files. @default os.tmpdir() */
  readonly spillRoot?: string
  /**
   * Local folder where inputs from non-local storage (buckets, `memory://`) are
   * downloaded once and read from then on. @default none: read remotely each time
   */
  readonly cacheDir?: string
}

export type ExecuteResult<T> = {
  /** The written files (writers), in shard order. */
  readonly outputs: string[]
  /** The written files for writer pipelines, else the records themselves, in shard order. */
  readonly results: T[]
  readonly counters: StageCounters[]
}

/**
 * A stable name for a plan's scratch folder, so that a rerun with
 * `skipExisting` finds the committed shards of a crashed run. It covers the
 * plan's shape (inputs, operations and their settings, outputs, shard counts)
 * and bound args, but not function bodies, whose source text differs between loaders; like
 * `skipExisting` itself, resuming trusts that the code did not change.
 */
export function planHash(stages: readonly StagePlan[]): string {
  const h = createHash('sha256')
  // bound args (any structured-cloneable data) count by their serialized bytes
  const data = (k: string, v: unknown) =>
    k === 'args' && v !== undefined
      ? createHash('sha256').update(serialize(v)).digest('hex')
      : typeof v === 'function'
        ? 'fn'
        : typeof v === 'bigint'
          ? `${v}n`
          : v
  for (const s of stages) {
    h.update(s.name)
    h.update(JSON.stringify(s.input.kind === 'files' ? s.input.urls : s.input.kind))
    if (s.input.kind === 'shuffle') h.update(JSON.stringify(s.input.reduce, data))
    h.update(JSON.stringify(s.ops, data))
    h.update(JSON.stringify(s.output, data))
    h.update(String(s.numShards))
  }
  return h.digest('hex').slice(0, 16)
}

function defaultScratch(stages: readonly StagePlan[]): { url: string; persistent: boolean } {
  const last = stages[stages.length - 1]!
  const inMemorySource = stages[0]!.input.kind !== 'files'
  if (last.output.kind === 'write' && !inMemorySource) {
    const dir = last.output.writer.pattern.slice(0, last.output.writer.pattern.lastIndexOf('/') + 1) || './'
    const { url } = splitUrl(dir)
    return { url: `${url.endsWith('/') ? url : `${url}/`}.zephyr-scratch-${planHash(stages)}/`, persistent: true }
  }
  return {
    url: `${splitUrl(join(tmpdir(), `zephyr-${planHash(stages)}-${randomBytes(4).toString('hex')}`)).url}/`,
    persistent: false,
  }
}

async function removeScratch(url: string): Promise<void> {
  const loc = await locate(url)
  const local = loc.storage.localPath(loc.path.replace(/\/$/, ''))
  if (local) {
    await rm(local, { recursive: true, force: true })
    return
  }
  for await (const info of loc.storage.list(loc.path)) await loc.storage.delete(info.path)
}

async function exists(url: string): Promise<boolean> {
  const loc = await locate(url)
  return loc.storage.exists(loc.path)
}

/** Runs `fn` over 0..n-1 with at most `limit` in flight; the first error stops new work and is thrown. */
async function pool(items: readonly number[], limit: number, fn: (i: number) => Promise<void>): Promise<void> {
  let next = 0
  let failed: unknown
  const lanes = Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, async () => {
    while (failed === undefined && next < items.length) {
      const i = items[next++]!
      try {
        await fn(i)
      } catch (err) {
        failed ??= err
      }
    }
  })
  await Promise.all(lanes)
  if (failed !== undefined) throw failed
}

function retryable(err: unknown): boolean {
  if (isZephyrError(err)) return err.retryable
  return true // the process died, a storage hiccup: try again
}

/** Writes an iterable source to a frames file in scratch, so worker processes can read it. */
async function materialize(stage: StagePlan, scratchUrl: string): Promise<StagePlan> {
  if (stage.input.kind !== 'iterable') return stage
  const url = `${scratchUrl}source/00000.bin`
  const out = await openOutput(url)
  const enc = new FrameEncoder()
  for await (const r of stage.input.iterable) {
    const chunk = enc.add(r)
    if (chunk) await out.write(chunk)
  }
  await out.write(enc.take())
  await out.close()
  return { ...stage, input: { kind: 'frames', urls: [url] } }
}

export async function executeStages<T>(
  planned: readonly StagePlan[],
  runner: TaskRunner,
  opts: ExecuteOptions = {},
): Promise<ExecuteResult<T>> {
  let stages = planned
  const maxAttempts = opts.maxAttempts ?? 3
  const last = stages[stages.length - 1]!
  // a run only ever deletes its own subfolder of a user-given scratch location
  const scratch = opts.scratch
    ? { url: `${opts.scratch.replace(/\/+$/, '')}/zephyr-${planHash(stages)}/`, persistent: true }
    : defaultScratch(stages)
  const env: TaskEnv = {
    scratch: scratch.url,
    memoryBudget: opts.memoryBudget ?? 512 * 2 ** 20,
    spillRoot: opts.spillRoot,
    cacheDir: opts.cacheDir,
  }

  // Which final shards must run: all, or (skipExisting) only the missing ones.
  let finalShards = Array.from({ length: last.numShards }, (_, i) => i)
  let skippedFinal = 0
  if (last.output.kind === 'write') {
    const present = await Promise.all(finalShards.map((i) => exists(outputUrl(last, i)!)))
    if (present.some(Boolean) && !opts.skipExisting && !opts.overwrite) {
      const first = outputUrl(last, present.indexOf(true))!
      throw new ZephyrError(
        'OUTPUT_EXISTS',
        `${first} already exists (${present.filter(Boolean).length} of ` +
          `${present.length} outputs); pass skipExisting to resume or ` +
          `overwrite to replace`,
      )
    }
    if (opts.skipExisting) {
      finalShards = finalShards.filter((i) => !present[i])
      skippedFinal = last.numShards - finalShards.length
    }
  }

  const counters: StageCounters[] = stages.map((s) => ({
    stage: s.index,
    name: s.name,
    shards: s.numShards,
    shardsSkipped: 0,
    retries: 0,
    timeMs: 0,
    ...emptyTaskCounters(),
  }))
  counters[counters.length - 1]!.shardsSkipped = skippedFinal
  const nothingToDo = finalShards.length === 0
  const scratchLoc = await locate(scratch.url)
  // Only a resume may reuse what an earlier run left in scratch.
  if (scratch.persistent && !opts.skipExisting && !nothingToDo) await removeScratch(scratch.url)

  try {
    if (runner.remote && !nothingToDo) stages = [await materialize(stages[0]!, scratch.url), ...stages.slice(1)]
    for (const planned of stages) {
      let stage = planned
      const c = counters[stage.index]!
      const t0 = performance.now()
      let shards = stage.index === last.index ? finalShards : Array.from({ length: stage.numShards }, (_, i) => i)
      if (nothingToDo) shards = []
      if (stage.index !== last.index && shards.length) {
        // resume: a shard whose done marker exists already has committed buckets
        const done = await Promise.all(
          shards.map((i) => scratchLoc.storage.exists(`${scratchLoc.path}${scratchPaths.done(stage.index, i)}`)),
        )
        c.shardsSkipped = done.filter(Boolean).length
        shards = shards.filter((_, k) => !done[k])
      } else if (stage.index !== last.index) c.shardsSkipped = stage.numShards
      if (shards.length && stage.input.kind === 'shuffle') {
        // read the previous stage's done markers once, not once per task
        const attempts = await committedAttempts(
          scratchLoc.storage,
          scratchLoc.path,
          stage.index - 1,
          stages[stage.index - 1]!.numShards,
        )
        stage = { ...stage, input: { ...stage.input, attempts } }
      }
      const progress = new StageProgress(stage.index, stages.length, stage.name, shards.length, opts.progress)
      await pool(shards, runner.concurrency, async (shard) => {
        for (let attempt = 1; ; attempt++) {
          try {
            const r = await runner.run(stage, shard, env)
            addTaskCounters(c, r.counters)
            progress.shardDone(r.counters.recordsOut)
            return
          } catch (err) {
            if (attempt >= maxAttempts || !retryable(err)) {
              if (isZephyrError(err) && !err.retryable) throw err
              throw new ZephyrError(
                'TASK_FAILED',
                `stage ${stage.index} (${stage.name}) shard ${shard} failed ` +
                  `${attempt} time(s): ${(err as Error).message}; see the cause, ` +
                  `fix it, and rerun with skipExisting to keep finished shards`,
                false,
                { cause: err },
              )
            }
            c.retries++
            log.warn({ stage: stage.index, shard, attempt, err }, 'task failed; retrying')
          }
        }
      })
      c.timeMs = performance.now() - t0
      progress.finish(c.timeMs)
    }

    const outputs =
      last.output.kind === 'write' ? Array.from({ length: last.numShards }, (_, i) => outputUrl(last, i)!) : []
    let results: T[]
    if (last.output.kind === 'collect') {
      results = []
      for (let i = 0; i < last.numShards; i++) {
        const stream = await scratchLoc.storage.readStream(`${scratchLoc.path}${scratchPaths.collected(last.index, i)}`)
        for await (const frames of decodeFrames(stream)) for (const f of frames) results.push(f.value as T)
      }
    } else results = outputs as T[]
    if (!nothingToDo && scratch.persistent) await removeScratch(scratch.url)
    return { outputs, results, counters }
  } finally {
    // a temp scratch folder goes either way; a persistent one stays after a failure, for resume
    if (!scratch.persistent) await removeScratch(scratch.url).catch(() => {})
  }
}
