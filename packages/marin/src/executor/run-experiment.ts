/**
 * @module Running an Experiment, the one path every other way of running one
 * (`experiment.run()`, `experiment.main()`, `runIfMain`, `marin run`) calls:
 * steps in this process (`local`) or each as a job on an iris cluster (a local
 * one by default, or a `JobScheduler` of the caller's).
 */
import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import type { JobScheduler, KubernetesPlatformOptions } from '@marin/iris'
import { Lease, MARIN_LAYOUT, experimentRecordPath, marinPrefix, prefixDir, prefixPath } from '@marin/rigging'
import { MarinError } from '../errors.js'
import { prefixScratchDir } from '../eval/remote-files.js'
import { Executor, type ExecutorOptions, type ExperimentRecord } from './executor.js'
import type { Experiment } from './experiment.js'
import { irisRunner } from './iris-runner.js'
import { openPrefixStorage } from './prefix-storage.js'

export type RunOptions = Omit<ExecutorOptions, 'runner'> & {
  /** Run steps in this process instead of as iris jobs. */
  readonly local?: boolean
  /** `'local'` (a cluster started in this process, state in `iris/` of {@link localClusterDir}) or a controller
   * `host:port`. @default 'local' */
  readonly cluster?: string
  /** Run the steps of the run's own cluster as Kubernetes Pods (`marin run --platform k8s --namespace NS`; the
   * options of iris's `kubernetesPlatform`). Only with `cluster: 'local'`. */
  readonly kubernetes?: KubernetesPlatformOptions
  readonly token?: string
  /** Submit the steps' jobs to this scheduler (left open) instead of one made for the run from `cluster`. */
  readonly scheduler?: Pick<JobScheduler, 'submit'>
}

/**
 * Plans and runs `experiment`; resolves with its record (status FAILED when a step failed).
 * @example
 * const record = await runExperiment(experiment, { local: true, maxConcurrent: 2 })
 */
export async function runExperiment(experiment: Experiment, opts: RunOptions = {}): Promise<ExperimentRecord> {
  const record = await runSteps(experiment, opts)
  if (experiment.report && record.status === 'SUCCESS') await publishReport(experiment, record, opts)
  return record
}

/** Builds the run's report and publishes it to `experiment.report.target`. */
async function publishReport(experiment: Experiment, record: ExperimentRecord, opts: RunOptions): Promise<void> {
  const out = opts.out ?? ((l: string) => process.stdout.write(`${l}\n`))
  out(`report of ${record.experiment}: building …`)
  const [{ buildReport }, { publishSite }] = await Promise.all([
    import('../report/build.js'),
    import('../report/publish.js'),
  ])
  const source = prefixPath(record.prefix, experimentRecordPath(record.experiment, record.run))
  const { data, site } = await buildReport(source, record.prefix, { docs: experiment.report!.docs })
  const res = await publishSite(site, experiment.report!.target)
  for (const w of data.warnings) out(`  report warning: ${w}`)
  out(
    `report of ${record.experiment}: ${res.uploaded.length} files ` +
      `uploaded, ${res.unchanged.length} unchanged, ` +
      `${res.deleted.length} deleted → ${res.target}`,
  )
}

/**
 * The folder whose `iris/` holds the run's own local cluster (its SQLite state, task folders and token): the prefix's
 * folder when the prefix is local; for an object store (`s3://…`), this machine's folder of that prefix,
 * `<tmpdir>/marin-prefix-<hash>` (`prefixScratchDir`: the folder datakit keeps its work and copies of that prefix
 * in), never the working directory. Scheduler state is this machine's, as a local Ray cluster's is under a remote
 * prefix in Python Marin; what must outlive the run (step outputs, statuses, the run record) is in the prefix.
 * @example
 * localClusterDir('s3://bucket/marin') // '/tmp/marin-prefix-3f0c…'
 */
export function localClusterDir(prefix: string): string {
  const url = marinPrefix({ prefix })
  return prefixDir(url) ?? prefixScratchDir(url)
}

async function runSteps(experiment: Experiment, opts: RunOptions): Promise<ExperimentRecord> {
  const prefix = marinPrefix({ prefix: opts.prefix })
  const base = { ...opts, prefix }
  if (opts.local || opts.dryRun) return new Executor(base).run(experiment)
  if (opts.scheduler)
    return new Executor({ ...base, runner: irisRunner(opts.scheduler, experiment.script, experiment.name) }).run(
      experiment,
    )
  const localPrefix = localClusterDir(prefix)
  const cluster = opts.cluster ?? 'local'
  if (opts.kubernetes && cluster !== 'local')
    throw new MarinError(
      'BAD_USAGE',
      `kubernetes: the run starts a cluster whose tasks are Pods, so it cannot also use the controller ` +
        `at ${cluster}; ` +
        'drop one of --platform k8s and --cluster',
    )
  // One local cluster owns `<prefix>/iris` at a time (its SQLite state and work folders);
  // a second driver on the same prefix starts its own cluster in a folder of its own.
  let owner: Lease | undefined
  let irisPrefix = localPrefix
  if (cluster === 'local') {
    owner = await Lease.tryAcquire(await openPrefixStorage(localPrefix), `${MARIN_LAYOUT.iris}/.local-cluster.lock`, {
      ttlMs: 30_000,
    })
    owner?.keepAlive()
    if (!owner)
      irisPrefix = join(localPrefix, MARIN_LAYOUT.iris, 'concurrent', `${Date.now()}-${randomBytes(3).toString('hex')}`)
  }
  // iris (gRPC, SQLite) loads while the executor plans and prints the plan; the first step waits for it.
  const scheduler = import('@marin/iris').then(
    async ({ JobScheduler, kubernetesPlatform }) =>
      new JobScheduler({
        cluster,
        prefix: irisPrefix,
        ...(opts.token ? { token: opts.token } : {}),
        ...(opts.kubernetes ? { local: { kubernetes: await kubernetesPlatform(opts.kubernetes) } } : {}),
      }),
  )
  try {
    return await new Executor({ ...base, runner: irisRunner(scheduler, experiment.script, experiment.name) }).run(
      experiment,
    )
  } finally {
    await (await scheduler.catch(() => undefined))?.close()
    await owner?.release().catch(() => {})
  }
}
