/** @module `marin run FILE` and `experiment.main()`: the same flags, the same behaviour. */
import { Command, CommanderError, Option } from 'commander'
import { scrubProcessOutput } from '@marin/rigging'
import type { Experiment } from '../executor/experiment.js'
import { loadExperiment } from '../executor/load-script.js'
import { runExperiment } from '../executor/run-experiment.js'
import { intArg, prefixOf, regexArg, type CliIo } from './io.js'

export type RunFlags = { dryRun?: boolean; force?: boolean; runOnly?: RegExp; maxConcurrent?: number; local?: boolean; cluster?: string }

/** Adds the flags of `marin run` to a command. */
export function withRunFlags(cmd: Command): Command {
  return cmd
    .option('--dry-run', 'print the plan with the reason for each step; run nothing')
    .option('--force', 'run the selected steps even when they are done')
    .addOption(new Option('--run-only <regex>', 'only steps whose name matches, and the steps they need').argParser(regexArg))
    .addOption(new Option('--max-concurrent <n>', 'steps running at once').argParser(intArg('--max-concurrent')))
    .option('--local', 'run steps in this process instead of as iris jobs')
    .option('--cluster <address>', "iris controller host:port, or 'local' for a cluster started here", 'local')
}

/** Runs `experiment` with parsed flags; resolves with the exit code (0 all done, 1 a step failed). */
export async function runWithFlags(experiment: Experiment, flags: RunFlags, io: CliIo): Promise<number> {
  const record = await runExperiment(experiment, {
    prefix: prefixOf(io),
    out: io.out,
    ...(flags.dryRun ? { dryRun: true } : {}),
    ...(flags.force ? { force: true } : {}),
    ...(flags.runOnly ? { runOnly: flags.runOnly } : {}),
    ...(flags.maxConcurrent ? { maxConcurrent: flags.maxConcurrent } : {}),
    ...(flags.local ? { local: true } : {}),
    ...(flags.cluster && flags.cluster !== 'local' ? { cluster: flags.cluster } : {}),
  })
  return record.status === 'FAILED' ? 1 : 0
}

export function runCommand(io: CliIo, run: (fn: () => Promise<number>) => Promise<void>): Command {
  return withRunFlags(new Command('run').description('run an experiment script (its default export)').argument('<file>', 'experiment script, e.g. experiments/x.ts')).action(
    (file: string, flags: RunFlags) => run(async () => runWithFlags(await loadExperiment(file), flags, io)),
  )
}

/** `experiment.main(argv)`: parses `marin run`'s flags and runs; sets process.exitCode. */
export async function runMain(experiment: Experiment, argv: readonly string[], io: CliIo = defaultIo()): Promise<number> {
  let code = 0
  const program = withRunFlags(new Command(experiment.name).description(`run the experiment ${experiment.name}`))
    .exitOverride()
    .configureOutput({ writeOut: (s) => io.out(s.trimEnd()), writeErr: (s) => io.err(s.trimEnd()) })
    .action(async (flags: RunFlags) => {
      code = await runWithFlags(experiment, flags, io)
    })
  try {
    await program.parseAsync([...argv], { from: 'user' })
  } catch (e) {
    if (e instanceof CommanderError) code = e.code === 'commander.helpDisplayed' || e.code === 'commander.version' ? 0 : 2
    else {
      io.err(`marin: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`)
      code = 1
    }
  }
  process.exitCode = code
  return code
}

/** The process's own I/O; a script run as a program may read secrets, so nothing printed holds one. */
function defaultIo(): CliIo {
  scrubProcessOutput()
  return {
    out: (l) => process.stdout.write(`${l}\n`),
    err: (l) => process.stderr.write(`${l}\n`),
    env: process.env,
  }
}
