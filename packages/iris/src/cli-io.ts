/** @module What the `iris` CLI commands share: I/O, connection flags, token lookup, argument parsers. */
import { readFileSync } from 'node:fs'
import { Command, InvalidArgumentError, Option } from 'commander'
import { IrisClient } from './client.js'

export type CliIo = {
  out: (line: string) => void
  err: (line: string) => void
  env: NodeJS.ProcessEnv
  /** Resolves when a long-running command (controller, worker, cluster) should stop. */
  stopped: Promise<void>
}

/** The controller address used when neither --controller nor IRIS_CONTROLLER is given. */
export const DEFAULT_CONTROLLER = '127.0.0.1:10000'

export class UsageError extends Error {}

export const intArg = (what: string, min = 0) => (v: string) => {
  if (!/^\d+$/.test(v) || Number(v) < min) throw new InvalidArgumentError(`expected ${what} (a whole number >= ${min})`)
  return Number(v)
}
export const collect = (v: string, prev: string[] = []) => [...prev, v]

export function tokenOf(o: { tokenEnv: string; tokenFile?: string }, io: CliIo): string | undefined {
  if (o.tokenFile !== undefined) {
    try {
      return readFileSync(o.tokenFile, 'utf8').trim()
    } catch (err) {
      throw new UsageError(`--token-file: cannot read ${o.tokenFile} (${(err as NodeJS.ErrnoException).code}); pass a readable file holding the token`)
    }
  }
  const t = io.env[o.tokenEnv]
  return t === undefined || t === '' ? undefined : t
}

export function withConnection(cmd: Command, io: CliIo): Command {
  return cmd
    .addOption(new Option('--controller <address>', 'controller host:port').default(io.env.IRIS_CONTROLLER || DEFAULT_CONTROLLER))
    .addOption(new Option('--token-env <name>', 'environment variable holding the bearer token').default('IRIS_TOKEN'))
    .option('--token-file <path>', 'file holding the bearer token')
}

export type ConnOpts = { controller: string; tokenEnv: string; tokenFile?: string }
export function clientOf(o: ConnOpts, io: CliIo): IrisClient {
  const token = tokenOf(o, io)
  return new IrisClient({ controller: o.controller, ...(token ? { token } : {}) })
}

/** Runs a command's body; the CLI records a failure instead of letting commander see it. */
export type Run = (fn: () => Promise<void>) => Promise<void>
