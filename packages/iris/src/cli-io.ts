/** @module What the `iris` CLI commands share: I/O, connection flags, token lookup, argument parsers. */
import { existsSync } from 'node:fs'
import { resolve } from 'node:path'
import type { ClientTlsOptions } from '@marin/ducky'
import { marinPrefix, prefixDir } from '@marin/rigging'
import { UsageError } from '@marin/rigging/cli'
import { type Command, InvalidArgumentError, Option } from 'commander'
import { IrisClient } from './client.js'
import { localTokenPath, readTokenFile } from './credentials.js'
import { isIrisError } from './errors.js'

export type CliIo = {
  out: (line: string) => void
  err: (line: string) => void
  env: NodeJS.ProcessEnv
  /** Resolves when a long-running command (controller, worker, cluster) should stop. */
  stopped: Promise<void>
}

/** The controller address used when neither --controller nor IRIS_CONTROLLER is given. */
export const DEFAULT_CONTROLLER = '127.0.0.1:10000'

export const intArg =
  (what: string, min = 0) =>
  (v: string) => {
    if (!/^\d+$/.test(v) || Number(v) < min)
      throw new InvalidArgumentError(`expected ${what} (a whole number >= ${min})`)
    return Number(v)
  }
export const collect = (v: string, prev: string[] = []) => [...prev, v]

/**
 * The token a command presents, from the first of: `--token-file`, the variable
 * `--token-env` names (IRIS_TOKEN), the file in IRIS_TOKEN_FILE, and the local
 * cluster's `<prefix>/iris/token` when the prefix (`$MARIN_PREFIX`, else `./.marin`) is a local folder.
 */
export function tokenOf(o: { tokenEnv: string; tokenFile?: string }, io: CliIo): string | undefined {
  const fromFile = (path: string, field: string, priv = false) => {
    try {
      return readTokenFile(path, field, { private: priv })
    } catch (err) {
      throw isIrisError(err) ? new UsageError(err.message) : err
    }
  }
  if (o.tokenFile !== undefined) return fromFile(o.tokenFile, '--token-file')
  const t = io.env[o.tokenEnv]
  if (t !== undefined && t !== '') return t
  if (io.env.IRIS_TOKEN_FILE) return fromFile(io.env.IRIS_TOKEN_FILE, 'IRIS_TOKEN_FILE')
  const prefix = prefixDir(marinPrefix({ env: io.env }))
  const local = prefix === undefined ? undefined : localTokenPath(prefix)
  return local !== undefined && existsSync(local) ? fromFile(local, 'the local cluster token', true) : undefined
}

/** `--tls-ca` (or IRIS_TLS_CA): talk TLS to a controller whose certificate that CA signed. */
export function tlsOf(o: { tlsCa?: string }): ClientTlsOptions | undefined {
  return o.tlsCa ? { caFile: resolve(o.tlsCa) } : undefined
}

export function withConnection(cmd: Command, io: CliIo): Command {
  return cmd
    .addOption(
      new Option('--controller <address>', 'controller host:port').default(
        io.env.IRIS_CONTROLLER || DEFAULT_CONTROLLER,
      ),
    )
    .addOption(new Option('--token-env <name>', 'environment variable holding the token').default('IRIS_TOKEN'))
    .option('--token-file <path>', 'file holding the token (default: IRIS_TOKEN_FILE, then <MARIN_PREFIX>/iris/token)')
    .addOption(tlsCaOption(io))
}

export function tlsCaOption(io: CliIo): Option {
  const o = new Option('--tls-ca <path>', "CA certificate (PEM) that signed the controller's TLS certificate; use TLS")
  return io.env.IRIS_TLS_CA ? o.default(io.env.IRIS_TLS_CA) : o
}

export type ConnOpts = { controller: string; tokenEnv: string; tokenFile?: string; tlsCa?: string }
export function clientOf(o: ConnOpts, io: CliIo): IrisClient {
  const token = tokenOf(o, io)
  const tls = tlsOf(o)
  return new IrisClient({ controller: o.controller, ...(token ? { token } : {}), ...(tls ? { tls } : {}) })
}
