/**
 * @module The `iris` command line: submit, status, list, logs, kill, workers,
 * controller, worker and `cluster start --local`, plus the `job run/logs/stop/list`
 * names Python iris users know. Read commands take `--json`. Bad usage exits 2.
 */
import { Command, CommanderError } from 'commander'
import pkg from '../package.json' with { type: 'json' }
import { UsageError, type CliIo, type Run } from './cli-io.js'
import { killCommand, listCommand, logsCommand, statusCommand, submitCommand, workersCommand } from './cli-job-commands.js'
import { clusterCommand, controllerCommand, workerCommand } from './cli-service-commands.js'
import { IrisError, isIrisError } from './errors.js'

/** Builds the program. Exposed so tests can check every flag that infra/ uses. */
export function buildProgram(io: CliIo, run: Run = (fn) => fn(), exit: { code: number } = { code: 0 }): Command {
  const program = new Command('iris')
    .description('iris: run jobs on a cluster of workers')
    .version(pkg.version)
    .exitOverride()
    .configureOutput({ writeOut: (s) => io.out(s.trimEnd()), writeErr: (s) => io.err(s.trimEnd()) })
    .showHelpAfterError(false)
  program.addCommand(submitCommand('submit', io, run, exit))
  program.addCommand(statusCommand('status', io, run))
  program.addCommand(listCommand('list', io, run))
  program.addCommand(logsCommand('logs', io, run))
  program.addCommand(killCommand('kill', io, run))
  program.addCommand(workersCommand(io, run))
  const job = new Command('job').description('the same commands under the names of Python iris')
  job.addCommand(submitCommand('run', io, run, exit))
  job.addCommand(logsCommand('logs', io, run))
  job.addCommand(killCommand('stop', io, run))
  job.addCommand(statusCommand('status', io, run))
  job.addCommand(listCommand('list', io, run))
  program.addCommand(job)
  program.addCommand(controllerCommand(io, run))
  program.addCommand(workerCommand(io, run))
  program.addCommand(clusterCommand(io, run))
  for (const c of [program, ...allCommands(program)]) c.exitOverride().configureOutput({ writeOut: (s) => io.out(s.trimEnd()), writeErr: (s) => io.err(s.trimEnd()) })
  return program
}

function allCommands(c: Command): Command[] {
  return c.commands.flatMap((s) => [s, ...allCommands(s)])
}

const USAGE_CODES: ReadonlySet<string> = new Set(['BAD_RESOURCES', 'BAD_REQUEST', 'BAD_MOUNT', 'BAD_DURATION'])

/** Runs the CLI; resolves with the exit code (0 ok, 1 failure, 2 bad usage). */
export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  let failure: unknown
  const run = async (fn: () => Promise<void>) => {
    try {
      await fn()
    } catch (e) {
      failure = e
    }
  }
  const exit = { code: 0 }
  const program = buildProgram(io, run, exit)
  try {
    await program.parseAsync([...argv], { from: 'user' })
  } catch (e) {
    if (e instanceof CommanderError) {
      if (e.code === 'commander.helpDisplayed' || e.code === 'commander.version' || e.code === 'commander.help') return 0
      return 2
    }
    failure = e
  }
  if (failure === undefined) return exit.code
  if (failure instanceof UsageError || (isIrisError(failure) && USAGE_CODES.has(failure.code))) {
    io.err(`iris: ${(failure as Error).message}`)
    return 2
  }
  io.err(`iris: ${failure instanceof IrisError ? failure.message : failure instanceof Error ? failure.message : String(failure)}`)
  return 1
}
