/** @module The commands of the `ducky` CLI, `tunnel` and `health`, loaded when one runs. */
import { readFileSync } from 'node:fs'
import { UsageError, type CliContext } from '@marin/rigging/cli'
import { InvalidArgumentError, Option, type Command } from 'commander'
import type { TokenSource } from './auth.js'
import type { CliIo } from './cli.js'
import { checkHealth } from './health-check.js'
import type { ClientTlsOptions } from './transport.js'
import { openTunnel, parseHostPort } from './tunnel.js'

function portArg(value: string): number {
  const n = Number(value)
  if (!/^\d+$/.test(value) || n > 65535) throw new InvalidArgumentError('expected a port number 0..65535')
  return n
}

function hostPortArg(value: string): string {
  try {
    return parseHostPort(value, 'value').key
  } catch {
    throw new InvalidArgumentError('expected host:port, like 127.0.0.1:8080')
  }
}

type ConnOpts = { tokenEnv: string; tokenFile?: string; tls?: boolean; caFile?: string; serverName?: string }

function tokenOf(o: ConnOpts, io: CliIo): TokenSource | undefined {
  if (o.tokenFile !== undefined) {
    try {
      return readFileSync(o.tokenFile, 'utf8').trim()
    } catch (err) {
      throw new UsageError(
        `--token-file: cannot read ${o.tokenFile} (` +
          `${(err as NodeJS.ErrnoException).code}); pass a readable file ` +
          `holding the token`,
      )
    }
  }
  const t = io.env[o.tokenEnv]
  return t === undefined || t === '' ? undefined : t
}

function tlsOf(o: ConnOpts): ClientTlsOptions | true | undefined {
  if (o.caFile === undefined && o.serverName === undefined) return o.tls ? true : undefined
  return { ...(o.caFile ? { caFile: o.caFile } : {}), ...(o.serverName ? { serverName: o.serverName } : {}) }
}

function connectionOptions(cmd: Command): Command {
  return cmd
    .addOption(new Option('--token-env <name>', 'environment variable holding the bearer token').default('DUCKY_TOKEN'))
    .option('--token-file <path>', 'file holding the bearer token')
    .option('--tls', 'connect with TLS, trusting the system roots')
    .option('--ca-file <path>', 'connect with TLS, trusting this CA or self-signed certificate (PEM)')
    .option('--server-name <name>', 'name to check the server certificate against')
}

/** `ducky tunnel`: forwards a local port until the process is told to stop. */
export function defineTunnel(cmd: Command, io: CliIo): void {
  connectionOptions(
    cmd
      .requiredOption('--to <host:port>', 'target as the server sees it (must be in its allow-list)', hostPortArg)
      .requiredOption('--via <host:port>', 'the ducky server that carries the tunnel')
      .requiredOption('--listen <port>', 'local port to listen on (0 picks one)', portArg)
      .option('--host <host>', 'local interface to listen on', '127.0.0.1'),
  ).action(async (o: ConnOpts & { to: string; via: string; listen: number; host: string }) => {
    const tunnel = await openTunnel({
      to: o.to,
      via: o.via,
      listen: o.listen,
      host: o.host,
      token: tokenOf(o, io),
      tls: tlsOf(o),
    })
    io.out(JSON.stringify({ listen: tunnel.address, to: o.to, via: o.via }))
    await io.stopped
    await tunnel.close()
  })
}

/** `ducky health`: exit 0 when the server says SERVING, else 1. */
export function defineHealth(cmd: Command, io: CliIo, ctx: CliContext): void {
  connectionOptions(
    cmd
      .argument('<address>', 'host:port of the server')
      .option('--service <name>', 'service to ask about (default: the whole server)', ''),
  ).action(async (address: string, o: ConnOpts & { service: string }) => {
    const status = await checkHealth(address, { service: o.service, tls: tlsOf(o) })
    io.out(status)
    if (status !== 'SERVING') ctx.exitWith(1)
  })
}
