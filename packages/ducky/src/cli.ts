/**
 * @module The `ducky` command line: `ducky tunnel --to host:port --via server --listen port`
 * and `ducky health <address>`. Runs on rigging's CLI runner: exit 0 ok, 1 failure, 2 bad
 * usage; a command's module loads when it runs.
 */
import { lineCli, type CliContext } from '@marin/rigging/cli'
import type { Command } from 'commander'
import pkg from '../package.json' with { type: 'json' }
import { RpcError } from './errors.js'

export type CliIo = {
  /** Writes one line (without its newline). */
  out: (line: string) => void
  err: (line: string) => void
  env: NodeJS.ProcessEnv
  /** Resolves when the process should stop (SIGINT/SIGTERM in the real CLI). */
  stopped: Promise<void>
}

type Commands = typeof import('./cli-commands.js')

const cli = lineCli((io: CliIo) => {
  const load = (pick: (m: Commands) => (cmd: Command, io: CliIo, ctx: CliContext) => void) => async () => {
    const define = pick(await import('./cli-commands.js'))
    return (cmd: Command, ctx: CliContext) => define(cmd, io, ctx)
  }
  return {
    package: pkg,
    commands: [
      {
        name: 'tunnel',
        description: 'forward a local TCP port to a target reachable from a ducky server',
        load: load((m) => m.defineTunnel),
      },
      {
        name: 'health',
        description: 'ask a server for its health (exit 0 when SERVING)',
        load: load((m) => m.defineHealth),
      },
    ],
    isUsageError: (err) => err instanceof RpcError && err.code === 'INVALID_ARGUMENT',
  }
})

/** Runs the CLI on `argv` (without node and script) and returns the exit code. */
export const runCli = (argv: readonly string[], io: CliIo): Promise<number> => cli.run(argv, io)
