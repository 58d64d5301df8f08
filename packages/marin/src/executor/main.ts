/**
 * @module An experiment script run as a program: `experiment.main(argv)` and
 * `runIfMain(import.meta.url, experiment)` parse the flags of `marin run` and
 * call `runExperiment`, the one way an experiment runs.
 */
import { Command, CommanderError, Option } from 'commander'
import { fileURLToPath } from 'node:url'
import { resolve } from 'node:path'
import { scrubProcessOutput } from '@marin/rigging'
import { intArg, prefixOf, regexArg, type CliIo } from '../cli/io.js'
import type { ExperimentRecord } from './executor.js'
import type { Experiment } from './experiment.js'
import { UsageError } from '@marin/rigging/cli'
import { runExperiment } from './run-experiment.js'

/** Set on globalThis (a count) while `loadExperiment` imports a script. */
export const LOADING = Symbol.for('marin.loadingScript')

/** Whether `loadExperiment` is importing a script now (its own `experiment.main()` then does nothing). */
export const isLoadingScript = (): boolean =>
  (((globalThis as Record<symbol, unknown>)[LOADING] as number | undefined) ?? 0) > 0

/** The flags of `marin run`, parsed. */
export type RunFlags = {
  dryRun?: boolean
  force?: boolean
  runOnly?: RegExp
  maxConcurrent?: number
  local?: boolean
  cluster?: string
  platform?: 'local' | 'k8s'
  namespace?: string
  kubeconfig?: string
}

/** Adds the flags of `marin run` to a command. */
export function withRunFlags(cmd: Command): Command {
  return cmd
    .option('--dry-run', 'print the plan with the reason for each step; run nothing')
    .option('--force', 'run the selected steps even when they are done')
    .addOption(
      new Option('--run-only <regex>', 'only steps whose name matches, and the steps they need').argParser(regexArg),
    )
    .addOption(new Option('--max-concurrent <n>', 'steps running at once').argParser(intArg('--max-concurrent')))
    .option('--local', 'run steps in this process instead of as iris jobs')
    .option('--cluster <address>', "iris controller host:port, or 'local' for a cluster started here", 'local')
    .addOption(
      new Option('--platform <platform>', "the run's own cluster: local (steps as processes here) or k8s (as Pods)")
        .choices(['local', 'k8s'])
        .default('local'),
    )
    .option('--namespace <ns>', 'k8s: the namespace of step Pods')
    .option('--kubeconfig <path>', 'k8s: kubeconfig file (default: KUBECONFIG, ~/.kube/config, then in-cluster)')
}

/** Runs `experiment` with parsed flags; resolves with its record (status FAILED when a step failed). */
export function runWithFlags(experiment: Experiment, flags: RunFlags, io: CliIo): Promise<ExperimentRecord> {
  if (flags.platform === 'k8s' && !flags.namespace)
    throw new UsageError('--platform k8s needs --namespace NS (the namespace of step Pods)')
  return runExperiment(experiment, {
    prefix: prefixOf(io),
    out: io.out,
    ...(flags.dryRun ? { dryRun: true } : {}),
    ...(flags.force ? { force: true } : {}),
    ...(flags.runOnly ? { runOnly: flags.runOnly } : {}),
    ...(flags.maxConcurrent ? { maxConcurrent: flags.maxConcurrent } : {}),
    ...(flags.local ? { local: true } : {}),
    ...(flags.cluster && flags.cluster !== 'local' ? { cluster: flags.cluster } : {}),
    ...(flags.platform === 'k8s'
      ? {
          kubernetes: {
            namespace: flags.namespace!,
            ...(flags.kubeconfig ? { kubeconfig: resolve(flags.kubeconfig) } : {}),
          },
        }
      : {}),
  })
}

/**
 * `experiment.main(argv)`: parses `marin run`'s flags and runs. Sets `process.exitCode` (0 every
 * step done, 1 a step failed or the run threw, 2 bad usage) and resolves with the run's record,
 * or undefined when nothing ran (help, bad usage, or the script imported by `marin run` or a step job).
 */
export async function runMain(
  experiment: Experiment,
  argv: readonly string[] = process.argv.slice(2),
  io: CliIo = processIo(),
): Promise<ExperimentRecord | undefined> {
  if (process.env.MARIN_STEP_CHILD === '1' || isLoadingScript()) return undefined
  let record: ExperimentRecord | undefined
  let code = 0
  const program = withRunFlags(new Command(experiment.name).description(`run the experiment ${experiment.name}`))
    .exitOverride()
    .configureOutput({ writeOut: (s) => io.out(s.trimEnd()), writeErr: (s) => io.err(s.trimEnd()) })
    .action(async (flags: RunFlags) => {
      record = await runWithFlags(experiment, flags, io)
      code = record.status === 'FAILED' ? 1 : 0
    })
  try {
    await program.parseAsync([...argv], { from: 'user' })
  } catch (e) {
    if (e instanceof CommanderError)
      code = e.code === 'commander.helpDisplayed' || e.code === 'commander.version' ? 0 : 2
    else if (e instanceof UsageError) {
      io.err(`${experiment.name}: ${e.message}`)
      code = 2
    } else {
      io.err(`${experiment.name}: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`)
      code = 1
    }
  }
  process.exitCode = code
  return record
}

/**
 * Runs the experiment (as `experiment.main()` does) when the calling module is the program's entry
 * point (`tsx experiments/x.ts --dry-run`), and not when `marin run` or an iris job imports it.
 * Resolves with the run's record when it ran, undefined when it did not.
 * @example
 * export default experiment
 * const record = await runIfMain(import.meta.url, experiment)
 */
export async function runIfMain(
  importMetaUrl: string,
  experiment: { main(argv?: readonly string[]): Promise<ExperimentRecord | undefined> },
): Promise<ExperimentRecord | undefined> {
  const entry = process.argv[1]
  if (!entry || process.env.MARIN_STEP_CHILD === '1') return undefined
  const self = fileURLToPath(importMetaUrl)
  const strip = (p: string) => p.replace(/\.[cm]?[jt]sx?$/, '')
  if (resolve(entry) !== self && strip(resolve(entry)) !== strip(self)) return undefined
  return experiment.main(process.argv.slice(2))
}

/** The process's own I/O; a script run as a program may read secrets, so nothing printed holds one. */
function processIo(): CliIo {
  scrubProcessOutput()
  return {
    out: (l) => process.stdout.write(`${l}\n`),
    err: (l) => process.stderr.write(`${l}\n`),
    env: process.env,
  }
}
