/** @module Running an Experiment: in this process (`local`) or as jobs on an iris cluster (a local one by default). */
import { resolve } from 'node:path'
import { JobScheduler } from '@marin/iris'
import { Executor, defaultPrefix, type ExecutorOptions, type ExperimentRecord } from './executor.js'
import type { Experiment } from './experiment.js'
import { irisRunner } from './iris-runner.js'

export type RunOptions = Omit<ExecutorOptions, 'runner'> & {
  /** Run steps in this process instead of as iris jobs. */
  readonly local?: boolean
  /** `'local'` (a cluster started in this process, state in `<prefix>/iris`) or a controller `host:port`. @default 'local' */
  readonly cluster?: string
  readonly token?: string
}

/**
 * Plans and runs `experiment`; resolves with its record (status FAILED when a step failed).
 * @example
 * const record = await runExperiment(experiment, { local: true, maxConcurrent: 2 })
 */
export async function runExperiment(experiment: Experiment, opts: RunOptions = {}): Promise<ExperimentRecord> {
  const prefix = defaultPrefix(opts.prefix)
  const base = { ...opts, prefix }
  if (opts.local || opts.dryRun) return new Executor(base).run(experiment)
  const isUrl = /^[a-z][a-z0-9+.-]*:\/\//i.test(prefix)
  const localPrefix = prefix.startsWith('file://') ? new URL(prefix).pathname : isUrl ? resolve('.marin') : prefix
  const scheduler = new JobScheduler({ cluster: opts.cluster ?? 'local', prefix: localPrefix, ...(opts.token ? { token: opts.token } : {}) })
  try {
    return await new Executor({ ...base, runner: irisRunner(scheduler, experiment.script, experiment.name) }).run(experiment)
  } finally {
    await scheduler.close()
  }
}
