/**
 * @module The `marin` command line: `run`, `status`, `explain`, `ls`, `export`,
 * `publish-report`, `eval`, `serve`, on rigging's CLI runner. Each command is built in its own file and
 * listed in `COMMANDS`, which loads only the one being run. Exit 0 ok, 1 failure, 2 bad usage (the problem named);
 * no arguments print help and exit 2.
 */
import { lineCli, type CliContext, type CliSpec } from '@marin/rigging/cli'
import { Help, type Command } from 'commander'
import pkg from '../../package.json' with { type: 'json' }
import { isMarinError, type MarinErrorCode } from '../errors.js'
import type { CliIo, Run } from './io.js'

/** Adds a command's arguments, options and action to `cmd` (named and described from its entry). */
export type DefineCommand = (cmd: Command, io: CliIo, run: Run) => void

/**
 * A command of `marin` as the help lists it, and how to load it. Only the command being run is
 * loaded, so `marin --help` or `marin status` never loads the model, server or chart code of the others.
 */
export type CommandEntry = {
  readonly name: string
  /** Its line in `marin --help`: name, options and arguments. */
  readonly term: string
  readonly description: string
  readonly load: () => Promise<DefineCommand>
}

/** The commands of `marin`, in help order. Add an entry here to add a command. */
export const COMMANDS: readonly CommandEntry[] = [
  {
    name: 'run',
    term: 'run [options] <file>',
    description: 'run an experiment script (its default export)',
    load: async () => (await import('./run.js')).runCommand,
  },
  {
    name: 'status',
    term: 'status [options] [experiment]',
    description: 'the latest run of each experiment, or the steps of EXPERIMENT',
    load: async () => (await import('./status.js')).statusCommand,
  },
  {
    name: 'explain',
    term: 'explain [options] <step>',
    description:
      "why STEP's version differs from its last completed one: the " +
      'versioned fields and dependency hashes that changed',
    load: async () => (await import('./explain.js')).explainCommand,
  },
  {
    name: 'ls',
    term: 'ls [options]',
    description: 'steps and their outputs under the prefix ($MARIN_PREFIX, default ./.marin)',
    load: async () => (await import('./ls.js')).lsCommand,
  },
  {
    name: 'export',
    term: 'export <artifact> <dir>',
    description: 'copy the files of an artifact version (a model such as models/gpt-brown@1) into a folder',
    load: async () => (await import('./export.js')).exportCommand,
  },
  {
    name: 'publish-report',
    term: 'publish-report [options]',
    description:
      "add an experiment run's page to the report site (it keeps every run) in a folder, storage URL or http(s) target",
    load: async () => (await import('../report/cli.js')).publishReportCommand,
  },
  {
    name: 'eval',
    term: 'eval [options]',
    description: 'evaluate a model on tasks; results go to finestore and are printed',
    load: async () => (await import('../eval/cli.js')).evalCommand,
  },
  {
    name: 'serve',
    term: 'serve [options]',
    description:
      'serve a checkpoint with an OpenAI-compatible API ' +
      '(/v1/completions, /v1/chat/completions, /v1/models, /health, /metrics)',
    load: async () => (await import('../serve/cli.js')).serveCommand,
  },
]

const USAGE_CODES: ReadonlySet<MarinErrorCode> = new Set([
  'BAD_USAGE',
  'SCRIPT_INVALID',
  'STEP_NOT_FOUND',
  'EXPERIMENT_NOT_FOUND',
  'REPORT_SOURCE_INVALID',
])

function spec(io: CliIo): CliSpec {
  const terms = new Map(COMMANDS.map((c) => [c.name, c.term]))
  const bind = (c: CommandEntry) => async () => {
    const define = await c.load()
    return (cmd: Command, ctx: CliContext) => define(cmd, io, async (fn) => ctx.exitWith(await fn()))
  }
  return {
    package: pkg,
    // Commands are listed with their arguments before they load.
    options: (program) =>
      void program.configureHelp({ subcommandTerm: (cmd) => terms.get(cmd.name()) ?? new Help().subcommandTerm(cmd) }),
    commands: COMMANDS.map((c) => ({ name: c.name, description: c.description, load: bind(c) })),
    isUsageError: (err) => isMarinError(err) && USAGE_CODES.has(err.code),
  }
}

const cli = lineCli(spec)

/** Every command loaded, for tests that check each command's flags and help line. */
export const buildProgram = (io: CliIo): Promise<Command> => cli.loadAll(io)

/** Runs the CLI on rigging's runner; resolves with the exit code (0 ok, 1 failure, 2 bad usage). */
export const runCli = (argv: readonly string[], io: CliIo): Promise<number> => cli.run(argv, io)
