/**
 * @module The `iris` command line: submit, status, list, logs, kill, workers,
 * controller, worker and `cluster start --local`, plus the `job run/logs/stop/list`
 * names Python iris users know. Read commands take `--json`. Runs on rigging's CLI
 * runner: exit 0 ok, 1 failure (a job that does not exist, a controller that does
 * not answer), 2 bad usage; a command's module loads when it runs.
 */
import { lineCli, type CliContext, type CliSpec } from '@marin/rigging/cli'
import type { Command } from 'commander'
import pkg from '../package.json' with { type: 'json' }
import { COMMANDS } from './cli-commands.js'
import type { CliIo } from './cli-io.js'
import { isIrisError } from './errors.js'

const USAGE_CODES: ReadonlySet<string> = new Set(['BAD_RESOURCES', 'BAD_REQUEST', 'BAD_MOUNT', 'BAD_DURATION'])

type Define = (cmd: Command, io: CliIo, ctx: CliContext) => void
type Jobs = typeof import('./cli-job-commands.js')
type Services = typeof import('./cli-service-commands.js')

function spec(io: CliIo): CliSpec {
  const bind = (define: Define) => (cmd: Command, ctx: CliContext) => define(cmd, io, ctx)
  const jobs = (pick: (m: Jobs) => Define) => async () => bind(pick(await import('./cli-job-commands.js')))
  const services = (pick: (m: Services) => Define) => async () => bind(pick(await import('./cli-service-commands.js')))
  return {
    package: pkg,
    commands: [
      { name: 'submit', description: COMMANDS.submit, load: jobs((m) => m.defineSubmit) },
      { name: 'status', description: COMMANDS.status, load: jobs((m) => m.defineStatus) },
      { name: 'list', description: COMMANDS.list, load: jobs((m) => m.defineList) },
      { name: 'logs', description: COMMANDS.logs, load: jobs((m) => m.defineLogs) },
      { name: 'kill', description: COMMANDS.kill, load: jobs((m) => m.defineKill) },
      { name: 'workers', description: COMMANDS.workers, load: jobs((m) => m.defineWorkers) },
      { name: 'job', description: COMMANDS.job, load: jobs((m) => m.defineJobGroup) },
      { name: 'controller', description: COMMANDS.controller, load: services((m) => m.defineController) },
      { name: 'worker', description: COMMANDS.worker, load: services((m) => m.defineWorker) },
      { name: 'cluster', description: COMMANDS.cluster, load: services((m) => m.defineCluster) },
      { name: 'materialize', description: COMMANDS.materialize, load: services((m) => m.defineMaterialize) },
    ],
    isUsageError: (err) => isIrisError(err) && USAGE_CODES.has(err.code),
  }
}

const cli = lineCli(spec)

/** Every command loaded, for tests that check each flag other files (infra/, messages) name. */
export const buildProgram = (io: CliIo): Promise<Command> => cli.loadAll(io)

/** Runs the CLI; resolves with the exit code (0 ok, 1 failure, 2 bad usage). */
export const runCli = (argv: readonly string[], io: CliIo): Promise<number> => cli.run(argv, io)
