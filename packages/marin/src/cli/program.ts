/**
 * @module The `marin` command line: `run`, `status`, `explain`, `ls`. Each
 * command is built in its own file and added here, so more (`serve`, `eval`,
 * `publish-report`) slot in the same way. Bad usage exits 2 with the problem named.
 */
import { Command, CommanderError } from 'commander'
import pkg from '../../package.json' with { type: 'json' }
import { UsageError, type CliIo } from './io.js'
import { explainCommand } from './explain.js'
import { lsCommand } from './ls.js'
import { runCommand } from './run.js'
import { statusCommand } from './status.js'
import { serveCommand } from '../serve/cli.js'
import { evalCommand } from '../eval/cli.js'
import { publishReportCommand } from '../report/cli.js'
import { isMarinError, type MarinErrorCode } from '../errors.js'

/** A command body: resolves with an exit code. */
export type Run = (fn: () => Promise<number>) => Promise<void>

/** Builds a command given the CLI's I/O and the runner that records its outcome. */
export type CommandFactory = (io: CliIo, run: Run) => Command

/** The commands of `marin`, in help order. Add a factory here to add a command. */
export const COMMANDS: readonly CommandFactory[] = [runCommand, statusCommand, explainCommand, lsCommand, publishReportCommand, evalCommand, serveCommand]

const USAGE_CODES: ReadonlySet<MarinErrorCode> = new Set(['BAD_USAGE', 'SCRIPT_INVALID', 'STEP_NOT_FOUND', 'EXPERIMENT_NOT_FOUND', 'REPORT_SOURCE_INVALID'])

/** Builds the program. */
export function buildProgram(io: CliIo, run: Run, commands: readonly CommandFactory[] = COMMANDS): Command {
  const program = new Command('marin').description('marin: reproducible experiments').version(pkg.version)
  for (const make of commands) program.addCommand(make(io, run))
  for (const c of [program, ...program.commands]) {
    c.exitOverride().configureOutput({ writeOut: (s) => io.out(s.trimEnd()), writeErr: (s) => io.err(s.trimEnd()) })
  }
  return program
}

/** Runs the CLI; resolves with the exit code (0 ok, 1 failure, 2 bad usage). */
export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  let failure: unknown
  let code = 0
  const run: Run = async (fn) => {
    try {
      code = await fn()
    } catch (e) {
      failure = e
    }
  }
  try {
    await buildProgram(io, run).parseAsync([...argv], { from: 'user' })
  } catch (e) {
    if (e instanceof CommanderError) return e.code === 'commander.helpDisplayed' || e.code === 'commander.version' || e.code === 'commander.help' ? 0 : 2
    failure = e
  }
  if (failure === undefined) return code
  if (failure instanceof UsageError || (isMarinError(failure) && USAGE_CODES.has(failure.code))) {
    io.err(`marin: ${(failure as Error).message}`)
    return 2
  }
  io.err(`marin: ${failure instanceof Error ? (isMarinError(failure) ? failure.message : (failure.stack ?? failure.message)) : String(failure)}`)
  return 1
}
