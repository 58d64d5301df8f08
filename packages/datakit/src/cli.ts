/**
 * @module The `datakit` command: `datakit [--prefix P] ls [--json]`, `datakit show NAME[@VERSION] [--json]`.
 * Runs on rigging's CLI runner: exit 0 ok, 1 failure (not found), 2 bad usage; commands load when they run.
 */
import { STDIO, textCli } from '@marin/rigging/cli'
import pkg from '../package.json' with { type: 'json' }
import { DatakitError } from './errors.js'

/** Runs the CLI on `argv` (without `node script`); resolves to the exit code. */
export const runCli = textCli(
  (io) => ({
    package: pkg,
    prefix: true,
    commands: [
      {
        name: 'ls',
        description: 'list datasets with their latest version',
        load: async () => (await import('./cli-commands.js')).defineLs(io),
      },
      {
        name: 'show',
        description: 'show one dataset version (latest unless NAME@VERSION)',
        load: async () => (await import('./cli-commands.js')).defineShow(io),
      },
    ],
    isUsageError: (err) => err instanceof DatakitError && err.code === 'INVALID_ARGUMENT',
  }),
  STDIO,
)
