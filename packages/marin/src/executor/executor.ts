/**
 * @module The executor: plans a step DAG from the status files under the
 * prefix, runs what must run (dependencies first, at most `maxConcurrent` at a
 * time) through a `StepRunner` (in this process, or as iris jobs), marks the
 * dependents of failures DEP_FAILED, and writes the experiment record.
 */
import { randomBytes } from 'node:crypto'
import {
  Lease,
  experimentRecordPath,
  logger,
  marinPrefix,
  provenance,
  scrubSecretValues,
  type Storage,
} from '@marin/rigging'
import { MarinError } from '../errors.js'
import { dependenciesOf, topoSort } from './graph.js'
import { formatPlan, planStep, selectSteps, type PlanEntry } from './plan.js'
import { openPrefixStorage } from './prefix-storage.js'
import { progressSink } from './progress.js'
import { ignoreLostRace, recordHistory, lockPath, readStatus, writeStatus } from './status-files.js'
import { runStepHere, type RunStepOptions, type StepResult } from './step-runner.js'
import type { Step } from './step.js'
import { computeVersions, resolveConfig, type StepVersion } from './version.js'

const log = logger('marin')

/** What a runner needs to run one step: what running it here takes, and where to report progress. */
export type StepTask = Omit<RunStepOptions, 'owner' | 'logName' | 'force'> & {
  readonly force: boolean
  /** Where a runner that runs the step elsewhere reports what it is doing (its newest log line). */
  readonly progress?: (text: string) => void
}

/** Runs one step somewhere and reports how it ended. */
export type StepRunner = (task: StepTask) => Promise<StepResult>

/** Runs steps in this process. */
export const localRunner: StepRunner = (t) =>
  runStepHere({
    storage: t.storage,
    step: t.step,
    version: t.version,
    config: t.config,
    outputPath: t.outputPath,
    leaseTtlMs: t.leaseTtlMs,
    force: t.force,
  })

export type ExecutorOptions = {
  /** Storage URL or local path of the prefix. @default $MARIN_PREFIX, else ./.marin */
  readonly prefix?: string
  /** Print the plan, run nothing. */
  readonly dryRun?: boolean
  /** Re-run selected steps even when done. */
  readonly force?: boolean
  /** Only steps whose name matches (and what they need). */
  readonly runOnly?: string | RegExp
  /** Steps running at once. @default 4 */
  readonly maxConcurrent?: number
  /** Lease TTL of a running step; renewed every third of it. @default $MARIN_LEASE_TTL_MS, else 60000 */
  readonly leaseTtlMs?: number
  /** @default localRunner */
  readonly runner?: StepRunner
  /** Where plan and progress lines go. @default nowhere */
  readonly out?: (line: string) => void
}

export type StepRecord = {
  readonly name: string
  readonly version: string
  readonly nameHash: string
  readonly outputPath: string
  readonly dependencies: readonly string[]
  readonly action: PlanEntry['action']
  readonly reason: string
  readonly status: 'SUCCESS' | 'FAILED' | 'DEP_FAILED' | 'SKIPPED' | 'PLANNED'
  readonly detail?: string
  readonly error?: string
  readonly startedAt?: string
  readonly finishedAt?: string
  readonly seconds?: number
}

/** `experiments/<name>/<run>.json`: what reports read. */
export type ExperimentRecord = {
  readonly experiment: string
  readonly run: string
  readonly prefix: string
  readonly script?: string
  readonly config?: unknown
  readonly options: { dryRun: boolean; force: boolean; runOnly?: string; maxConcurrent: number }
  readonly status: 'SUCCESS' | 'FAILED' | 'DRY_RUN'
  readonly startedAt: string
  readonly finishedAt: string
  readonly steps: readonly StepRecord[]
  readonly provenance: unknown
}

export type ExperimentRun = {
  readonly name: string
  readonly steps: readonly Step[]
  readonly script?: string
  readonly config?: unknown
}

/** Where a step's output is, as its function sees it: a local directory, else a URL. */
export function outputPathOf(storage: Storage, nameHash: string, subPath = ''): string {
  const rel = subPath ? `${nameHash}/${subPath}` : nameHash
  return storage.localPath(rel) ?? `${storage.url.replace(/\/+$/, '')}/${rel}`
}

/** Steps, their versions and resolved configs: the part of planning that needs no storage. */
export function prepare(
  steps: readonly Step[],
  storage: Storage,
): { order: Step[]; versions: Map<Step, StepVersion>; deps: Map<Step, Step[]>; configs: Map<Step, unknown> } {
  const order = topoSort(steps)
  const versions = computeVersions(order)
  const deps = new Map(order.map((s) => [s, dependenciesOf(s.config)]))
  const configs = new Map(
    order.map((s) => [s, resolveConfig(s.config, versions, (nh, sub) => outputPathOf(storage, nh, sub))]),
  )
  return { order, versions, deps, configs }
}

class Semaphore {
  private active = 0
  private readonly queue: (() => void)[] = []
  constructor(private readonly limit: number) {}
  async use<T>(fn: () => Promise<T>): Promise<T> {
    if (this.active >= this.limit) await new Promise<void>((r) => this.queue.push(r))
    this.active++
    try {
      return await fn()
    } finally {
      this.active--
      this.queue.shift()?.()
    }
  }
}

function toRegExp(r: string | RegExp | undefined): RegExp | undefined {
  if (r === undefined || r instanceof RegExp) return r
  try {
    return new RegExp(r)
  } catch (err) {
    throw new MarinError(
      'BAD_USAGE',
      `--run-only: ${JSON.stringify(r)} is not a regular expression (${(err as Error).message})`,
    )
  }
}

export class Executor {
  readonly prefix: string
  readonly leaseTtlMs: number
  readonly maxConcurrent: number
  private storagePromise: Promise<Storage> | undefined
  private readonly runOnly: RegExp | undefined

  constructor(readonly opts: ExecutorOptions = {}) {
    this.prefix = marinPrefix({ prefix: opts.prefix })
    const envTtl = Number(process.env.MARIN_LEASE_TTL_MS)
    this.leaseTtlMs = opts.leaseTtlMs ?? (envTtl > 0 ? envTtl : 60_000)
    this.maxConcurrent = opts.maxConcurrent ?? 4
    if (!Number.isInteger(this.maxConcurrent) || this.maxConcurrent < 1) {
      throw new MarinError('BAD_USAGE', `--max-concurrent: expected a whole number >= 1, got ${opts.maxConcurrent}`)
    }
    this.runOnly = toRegExp(opts.runOnly)
  }

  storage(): Promise<Storage> {
    this.storagePromise ??= openPrefixStorage(this.prefix)
    return this.storagePromise
  }

  /** The plan for `steps`, without running anything. */
  async plan(steps: readonly Step[]): Promise<PlanEntry[]> {
    const storage = await this.storage()
    const { order, versions, deps } = prepare(steps, storage)
    const { selected, matched } = selectSteps(order, deps, this.runOnly)
    return Promise.all(
      order.map((s) => planStep(storage, s, versions.get(s)!, selected.has(s), !!this.opts.force && matched.has(s))),
    )
  }

  /** Plans and (unless dry-run) runs an experiment; writes and returns its record. */
  async run(exp: ExperimentRun): Promise<ExperimentRecord> {
    const given = this.opts.out
    // A step run here may have read a secret, and its error is printed: every line is scrubbed.
    const rawOut = given ? (line: string) => given(scrubSecretValues(line)) : () => {}
    const progress = progressSink(rawOut, this.opts.out && process.stdout.isTTY ? { tty: process.stdout } : {})
    const out = (line: string) => {
      progress.done()
      rawOut(line)
    }
    const storage = await this.storage()
    const startedAt = new Date().toISOString()
    const { order, versions, deps, configs } = prepare(exp.steps, storage)
    const { selected, matched } = selectSteps(order, deps, this.runOnly)
    const plan = await Promise.all(
      order.map((s) => planStep(storage, s, versions.get(s)!, selected.has(s), !!this.opts.force && matched.has(s))),
    )
    const dryRun = !!this.opts.dryRun
    out(`${dryRun ? 'plan' : 'running'} ${exp.name}: ${order.length} steps under ${this.prefix}`)
    for (const l of formatPlan(plan)) out(`  ${l}`)
    const records = new Map<Step, StepRecord>()
    const base = (e: PlanEntry): Omit<StepRecord, 'status'> => ({
      name: e.step.name,
      version: e.version.hash,
      nameHash: e.version.nameHash,
      outputPath: outputPathOf(storage, e.version.nameHash),
      dependencies: e.version.dependencies,
      action: e.action,
      reason: e.reason,
    })
    if (dryRun) {
      for (const e of plan) records.set(e.step, { ...base(e), status: 'PLANNED' })
    } else {
      const at = new Date().toISOString()
      for (const e of plan) {
        if (e.selected)
          await recordHistory(storage, e.step.name, {
            nameHash: e.version.nameHash,
            hash: e.version.hash,
            fields: e.version.fields,
            dependencies: e.version.dependencies,
            status: 'PLANNED',
            at,
          })
      }
      const sem = new Semaphore(this.maxConcurrent)
      const runner = this.opts.runner ?? localRunner
      const done = new Map<Step, Promise<StepRecord>>()
      const byStep = new Map(plan.map((e) => [e.step, e]))
      const runOne = async (s: Step): Promise<StepRecord> => {
        const e = byStep.get(s)!
        const depRecords = await Promise.all(deps.get(s)!.map((d) => done.get(d)!))
        const failed = depRecords.filter((r) => r.status === 'FAILED' || r.status === 'DEP_FAILED')
        if (failed.length) {
          await this.markDepFailed(storage, e.version.nameHash)
          out(`  DEP_FAILED ${e.version.nameHash} (needs ${failed.map((r) => r.nameHash).join(', ')})`)
          return {
            ...base(e),
            status: 'DEP_FAILED',
            detail: `dependency failed: ${failed.map((r) => r.nameHash).join(', ')}`,
          }
        }
        if (e.action === 'skip') {
          return { ...base(e), status: 'SKIPPED', detail: e.reason }
        }
        const t0 = performance.now()
        const result = await sem
          .use(() => {
            progress.update(e.version.nameHash, 'started')
            return runner({
              storage,
              step: s,
              version: e.version,
              config: configs.get(s),
              outputPath: outputPathOf(storage, e.version.nameHash),
              leaseTtlMs: this.leaseTtlMs,
              force: !!this.opts.force && matched.has(s),
              progress: (text) => progress.update(e.version.nameHash, text),
            })
          })
          .catch(
            (err: unknown): StepResult => ({
              status: 'FAILED',
              error: err instanceof Error ? (err.stack ?? err.message) : String(err),
              startedAt,
              finishedAt: new Date().toISOString(),
            }),
          )
        const seconds = (performance.now() - t0) / 1000
        progress.finish(e.version.nameHash)
        out(
          `  ${result.status} ${e.version.nameHash} (${seconds.toFixed(1)} ` +
            `s)${result.detail ? `: ${result.detail}` : ''}` +
            `${result.error ? `\n${indent(result.error)}` : ''}`,
        )
        return {
          ...base(e),
          status: result.status,
          startedAt: result.startedAt,
          finishedAt: result.finishedAt,
          seconds,
          ...(result.detail ? { detail: result.detail } : {}),
          ...(result.error ? { error: result.error } : {}),
        }
      }
      for (const s of order) done.set(s, runOne(s))
      for (const s of order) records.set(s, await done.get(s)!)
    }
    const steps = order.map((s) => records.get(s)!)
    const failed = steps.some((r) => r.status === 'FAILED' || r.status === 'DEP_FAILED')
    const record: ExperimentRecord = {
      experiment: exp.name,
      run: `${startedAt.replace(/[:.]/g, '-')}-${randomBytes(3).toString('hex')}`,
      prefix: this.prefix,
      ...(exp.script ? { script: exp.script } : {}),
      ...(exp.config !== undefined ? { config: exp.config } : {}),
      options: {
        dryRun,
        force: !!this.opts.force,
        ...(this.runOnly ? { runOnly: this.runOnly.source } : {}),
        maxConcurrent: this.maxConcurrent,
      },
      status: dryRun ? 'DRY_RUN' : failed ? 'FAILED' : 'SUCCESS',
      startedAt,
      finishedAt: new Date().toISOString(),
      steps,
      provenance: provenance(),
    }
    if (!dryRun) {
      const path = experimentRecordPath(exp.name, record.run)
      await storage.write(path, `${JSON.stringify(record, null, 2)}\n`)
      out(`${record.status} ${exp.name}: record ${outputPathOf(storage, path)}`)
      log.info({ experiment: exp.name, run: record.run, status: record.status }, 'experiment finished')
    }
    return record
  }

  /** Writes DEP_FAILED unless another process holds the step (then its status is theirs). */
  private async markDepFailed(storage: Storage, nameHash: string): Promise<void> {
    const lease = await Lease.tryAcquire(storage, lockPath(nameHash), { ttlMs: this.leaseTtlMs })
    if (!lease) return
    try {
      const st = await readStatus(storage, nameHash)
      // Conditional: a run that lost the lease may still have written SUCCESS since our read.
      if (st?.status !== 'SUCCESS')
        await writeStatus(storage, nameHash, 'DEP_FAILED', {
          condition: st ? { ifGeneration: st.generation } : { ifAbsent: true },
        }).catch(ignoreLostRace)
    } finally {
      await lease.release()
    }
  }
}

const indent = (s: string) =>
  s
    .split('\n')
    .map((l) => `      ${l}`)
    .join('\n')
