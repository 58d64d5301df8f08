/**
 * @module The one way a Marin command line runs: `runCli(spec, argv, io)` builds a
 * commander program whose subcommands are loaded only when they run, and maps the
 * outcome to an exit code every CLI shares:
 *
 * | outcome | exit |
 * | --- | --- |
 * | the command finished (or `--help`, `--version`) | 0, or what the command set with `ctx.exitWith` |
 * | a failure: not found, unreachable, corrupt | 1, with `<cli>: <message>` on stderr |
 * | bad usage: unknown command or option, missing argument, `UsageError`, `spec.isUsageError` | 2 |
 * | no arguments (or a command group without its subcommand) | 2, with help on stderr |
 *
 * @example
 * process.exitCode = await runCli({
 *   package: pkg,
 *   commands: [{ name: 'ls', description: 'list things', load: async () => (await import('./cli-ls.js')).defineLs }],
 * }, process.argv.slice(2), { out: (s) => process.stdout.write(s), err: (s) => process.stderr.write(s) })
 */
import { Command, CommanderError } from 'commander'

/** Bad usage found after parsing (a flag value that does not fit, flags that conflict): exit 2. */
export class UsageError extends Error {
  override name = 'UsageError'
}

/** Where a CLI writes. Text is written as given: the runner ends its own messages with a newline. */
export type CliIo = {
  readonly out: (text: string) => void
  readonly err: (text: string) => void
}

/** What a command's definition can use while it runs. */
export type CliContext = {
  /** The options of the program itself (those given before the command name). */
  globals<T>(): T
  /** The exit code when the command finishes without throwing. @default 0 */
  exitWith(code: number): void
  /** Runs `fn` when the CLI is done, whatever the outcome (closing a store the command opened). */
  defer(fn: () => void | Promise<void>): void
}

/** Adds a command's arguments, options, action or subcommands to `cmd`, which already has its name and description. */
export type DefineCommand = (cmd: Command, ctx: CliContext) => void

export type LazyCommand = {
  readonly name: string
  /** Shown by `--help` without loading the command. */
  readonly description: string
  /** Imports the module that defines the command; called only when the command runs or shows its help. */
  readonly load: () => Promise<DefineCommand>
}

/** The fields of a package.json the runner reads. */
export type CliPackage = {
  /** The command's name is the first key (`{ "iris": "./bin/iris.js" }`). */
  readonly bin: Readonly<Record<string, string>>
  /** Printed by `--version`. */
  readonly version: string
  /** The first line of `--help`. */
  readonly description: string
}

export type CliSpec = {
  /** The package's package.json: the command's name, version and description. */
  readonly package: CliPackage
  /** The program takes `--prefix` (rigging's `marinPrefix` reads it from `ctx.globals()`). @default false */
  readonly prefix?: boolean
  /** Other options of the program itself. */
  readonly options?: (program: Command) => void
  readonly commands: readonly LazyCommand[]
  /** The package's own errors that mean bad usage (exit 2), besides `UsageError` and commander's. */
  readonly isUsageError?: (err: unknown) => boolean
}

type Built = {
  program: Command
  ctx: CliContext
  exit: { code: number }
  deferred: (() => void | Promise<void>)[]
  load: (cmd: Command) => Promise<void>
}

/** The command's name: the first `bin` of its package. */
export function cliName(spec: CliSpec): string {
  const name = Object.keys(spec.package.bin)[0]
  if (name === undefined) throw new Error('runCli: the package.json given has no "bin"; name the command there')
  return name
}

function build(spec: CliSpec, io: CliIo): Built {
  const exit = { code: 0 }
  const deferred: (() => void | Promise<void>)[] = []
  const name = cliName(spec)
  const program = new Command(name)
    .description(spec.package.description)
    .version(spec.package.version)
    .exitOverride()
    .configureOutput({ writeOut: io.out, writeErr: io.err })
    .showHelpAfterError(`(run ${name} --help for usage)`)
  if (spec.prefix)
    program.option(
      '--prefix <prefix>',
      'Marin prefix, a local path or storage URL (default: $MARIN_PREFIX, then ./.marin)',
    )
  spec.options?.(program)
  const ctx: CliContext = {
    globals: <T>() => program.opts<Record<string, unknown>>() as T,
    exitWith: (code) => void (exit.code = code),
    defer: (fn) => void deferred.push(fn),
  }
  const lazy = new Map<Command, LazyCommand>()
  // `.command()` copies exitOverride and the output settings to each command, and they to theirs.
  for (const c of spec.commands) lazy.set(program.command(c.name).description(c.description), c)
  const load = async (cmd: Command) => {
    const c = lazy.get(cmd)
    if (c === undefined) return
    lazy.delete(cmd)
    ;(await c.load())(cmd, ctx)
  }
  program.hook('preSubcommand', (_program, cmd) => load(cmd))
  return { program, ctx, exit, deferred, load }
}

/** Runs the CLI on `argv` (without node and the script); resolves to the exit code. */
export async function runCli(spec: CliSpec, argv: readonly string[], io: CliIo): Promise<number> {
  const { program, exit, deferred, load } = build(spec, io)
  try {
    // `help <command>` shows the command's help without passing through the hook that loads it.
    const asked = argv[argv.indexOf('help') + 1]
    if (argv.includes('help') && asked !== undefined) {
      const cmd = program.commands.find((c) => c.name() === asked)
      if (cmd) await load(cmd)
    }
    await program.parseAsync([...argv], { from: 'user' })
    return exit.code
  } catch (err) {
    if (err instanceof CommanderError) {
      if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version') return 0
      if (err.code === 'commander.help') return err.exitCode === 0 ? 0 : 2
      return 2
    }
    const usage = err instanceof UsageError || spec.isUsageError?.(err) === true
    io.err(`${cliName(spec)}: ${err instanceof Error ? err.message : String(err)}\n`)
    return usage ? 2 : 1
  } finally {
    for (const fn of deferred.reverse()) await fn()
  }
}

/** The program with every command loaded: for tests that check the flags other files use. */
export async function loadAllCommands(spec: CliSpec, io: CliIo): Promise<Command> {
  const { program, load } = build(spec, io)
  for (const cmd of program.commands) await load(cmd)
  return program
}

/** Where a CLI that writes whole lines writes (`out('done')`, no trailing newline). */
export type LineIo = {
  readonly out: (line: string) => void
  readonly err: (line: string) => void
}

/**
 * The two entry points of a CLI whose own code writes whole lines, built from its spec:
 * `run` (argv → exit code) and `loadAll` (every command loaded, for tests of flags and help).
 * The runner's own text ends in a newline; it is handed on as a line.
 */
export function lineCli<Io extends LineIo>(
  spec: (io: Io) => CliSpec,
): { run(argv: readonly string[], io: Io): Promise<number>; loadAll(io: Io): Promise<Command> } {
  const lines = (io: Io): CliIo => ({ out: (s) => io.out(s.trimEnd()), err: (s) => io.err(s.trimEnd()) })
  return {
    run: (argv, io) => runCli(spec(io), argv, lines(io)),
    loadAll: (io) => loadAllCommands(spec(io), lines(io)),
  }
}

/** The process's own stdout and stderr, as a {@link CliIo}. */
export const STDIO: CliIo = { out: (s) => process.stdout.write(s), err: (s) => process.stderr.write(s) }

/**
 * The entry point of a CLI whose own code writes text as given (newlines included), built from
 * its spec: argv → exit code, writing to `stdio` unless a test passes its own io.
 */
export function textCli<Io extends CliIo>(
  spec: (io: Io) => CliSpec,
  stdio: Io,
): (argv: readonly string[], io?: Io) => Promise<number> {
  return (argv, io = stdio) => runCli(spec(io), argv, io)
}
