/**
 * @module The `marin` command line: `run`, `status`, `explain`, `ls`,
 * `publish-report`, `eval`, `serve`. Each command is built in its own file and
 * listed in `COMMANDS`, which loads only the one being run. Bad usage exits 2 with the problem named.
 */
import { Command, CommanderError, Help } from 'commander'
import pkg from '../../package.json' with { type: 'json' }
import { UsageError, type CliIo } from './io.js'
import { isMarinError, type MarinErrorCode } from '../errors.js'

/** A command body: resolves with an exit code. */
export type Run = (fn: () => Promise<number>) => Promise<void>

/** Builds a command given the CLI's I/O and the runner that records its outcome. */
export type CommandFactory = (io: CliIo, run: Run) => Command

/**
 * A command of `marin` as the help lists it, and how to load it. Only the command being run is
 * loaded, so `marin --help` or `marin status` never loads the model, server or chart code of the others.
 */
export type CommandEntry = {
  readonly name: string
  /** Its line in `marin --help`: name, options and arguments. */
  readonly term: string
  readonly description: string
  readonly load: () => Promise<CommandFactory>
}

/** The commands of `marin`, in help order. Add an entry here to add a command. */
export const COMMANDS: readonly CommandEntry[] = [
  { name: 'run', term: 'run [options] <file>', description: 'run an experiment script (its default export)', load: async () => (await import('./run.js')).runCommand },
  { name: 'status', term: 'status [options] [experiment]', description: 'the latest run of each experiment, or the steps of EXPERIMENT', load: async () => (await import('./status.js')).statusCommand },
  {
    name: 'explain',
    term: 'explain [options] <step>',
    description: "why STEP's version differs from its last completed one: the versioned fields and dependency hashes that changed",
    load: async () => (await import('./explain.js')).explainCommand,
  },
  { name: 'ls', term: 'ls [options]', description: 'steps and their outputs under the prefix ($MARIN_PREFIX, default ./.marin)', load: async () => (await import('./ls.js')).lsCommand },
  {
    name: 'publish-report',
    term: 'publish-report [options]',
    description: 'build the static report of an experiment run and publish it to a folder, storage URL or http(s) PUT target',
    load: async () => (await import('../report/cli.js')).publishReportCommand,
  },
  { name: 'eval', term: 'eval [options]', description: 'evaluate a model on tasks; results go to finestore and are printed', load: async () => (await import('../eval/cli.js')).evalCommand },
  {
    name: 'serve',
    term: 'serve [options]',
    description: 'serve a checkpoint with an OpenAI-compatible API (/v1/completions, /v1/chat/completions, /v1/models, /health, /metrics)',
    load: async () => (await import('../serve/cli.js')).serveCommand,
  },
]

const USAGE_CODES: ReadonlySet<MarinErrorCode> = new Set(['BAD_USAGE', 'SCRIPT_INVALID', 'STEP_NOT_FOUND', 'EXPERIMENT_NOT_FOUND', 'REPORT_SOURCE_INVALID'])

/** The command `argv` runs (`marin X …` or `marin help X`), if it names one. */
function selected(argv: readonly string[], commands: readonly CommandEntry[]): CommandEntry | undefined {
  const name = argv[0] === 'help' ? argv[1] : argv[0]
  return commands.find((c) => c.name === name)
}

/** Builds the program: the command `argv` selects is loaded in full, the others are listed by their entries. */
export async function buildProgram(io: CliIo, run: Run, argv: readonly string[] = [], commands: readonly CommandEntry[] = COMMANDS): Promise<Command> {
  const program = new Command('marin').description('marin: reproducible experiments').version(pkg.version)
  const terms = new Map(commands.map((c) => [c.name, c.term]))
  program.configureHelp({ subcommandTerm: (cmd) => terms.get(cmd.name()) ?? new Help().subcommandTerm(cmd) })
  const chosen = selected(argv, commands)
  for (const c of commands) program.addCommand(c === chosen ? (await c.load())(io, run) : new Command(c.name).description(c.description))
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
    await (await buildProgram(io, run, argv)).parseAsync([...argv], { from: 'user' })
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
