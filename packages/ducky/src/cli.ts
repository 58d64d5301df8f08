/**
 * @module The `ducky` command line: `ducky tunnel --to host:port --via server --listen port`
 * and `ducky health <address>`. Bad usage prints what is wrong and exits 2.
 */
import { readFileSync } from 'node:fs'
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander'
import pkg from '../package.json' with { type: 'json' }
import type { TokenSource } from './auth.js'
import { RpcError } from './errors.js'
import { checkHealth } from './health-check.js'
import type { ClientTlsOptions } from './transport.js'
import { openTunnel, parseHostPort, type Tunnel } from './tunnel.js'

export type CliIo = {
  out: (line: string) => void
  err: (line: string) => void
  env: NodeJS.ProcessEnv
  /** Resolves when the process should stop (SIGINT/SIGTERM in the real CLI). */
  stopped: Promise<void>
}

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
      throw new UsageError(`--token-file: cannot read ${o.tokenFile} (${(err as NodeJS.ErrnoException).code}); pass a readable file holding the token`)
    }
  }
  const t = io.env[o.tokenEnv]
  return t === undefined || t === '' ? undefined : t
}

function tlsOf(o: ConnOpts): ClientTlsOptions | true | undefined {
  if (o.caFile === undefined && o.serverName === undefined) return o.tls ? true : undefined
  return { ...(o.caFile ? { caFile: o.caFile } : {}), ...(o.serverName ? { serverName: o.serverName } : {}) }
}

class UsageError extends Error {}

function connectionOptions(cmd: Command): Command {
  return cmd
    .addOption(new Option('--token-env <name>', 'environment variable holding the bearer token').default('DUCKY_TOKEN'))
    .option('--token-file <path>', 'file holding the bearer token')
    .option('--tls', 'connect with TLS, trusting the system roots')
    .option('--ca-file <path>', 'connect with TLS, trusting this CA or self-signed certificate (PEM)')
    .option('--server-name <name>', 'name to check the server certificate against')
}

/** Runs the CLI on `argv` (without node and script) and returns the exit code. */
export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  let code = 0
  const program = new Command('ducky')
    .description('Typed RPC over gRPC: tunnels and health checks')
    .version(pkg.version)
    .exitOverride()
    .configureOutput({ writeOut: (s) => io.out(s.trimEnd()), writeErr: (s) => io.err(s.trimEnd()) })
    .showHelpAfterError('(run ducky --help for usage)')

  connectionOptions(
    program
      .command('tunnel')
      .description('forward a local TCP port to a target reachable from a ducky server')
      .requiredOption('--to <host:port>', 'target as the server sees it (must be in its allow-list)', hostPortArg)
      .requiredOption('--via <host:port>', 'the ducky server that carries the tunnel')
      .requiredOption('--listen <port>', 'local port to listen on (0 picks one)', portArg)
      .option('--host <host>', 'local interface to listen on', '127.0.0.1'),
  ).action(async (o: ConnOpts & { to: string; via: string; listen: number; host: string }) => {
    let tunnel: Tunnel
    try {
      tunnel = await openTunnel({ to: o.to, via: o.via, listen: o.listen, host: o.host, token: tokenOf(o, io), tls: tlsOf(o) })
    } catch (err) {
      if (err instanceof UsageError) throw err
      io.err(`ducky tunnel: ${(err as Error).message}`)
      code = 1
      return
    }
    io.out(JSON.stringify({ listen: tunnel.address, to: o.to, via: o.via }))
    await io.stopped
    await tunnel.close()
  })

  connectionOptions(
    program
      .command('health')
      .description('ask a server for its health (exit 0 when SERVING)')
      .argument('<address>', 'host:port of the server')
      .option('--service <name>', 'service to ask about (default: the whole server)', ''),
  ).action(async (address: string, o: ConnOpts & { service: string }) => {
    try {
      const status = await checkHealth(address, { service: o.service, tls: tlsOf(o) })
      io.out(status)
      code = status === 'SERVING' ? 0 : 1
    } catch (err) {
      io.err(`ducky health: ${(err as Error).message}`)
      code = 1
    }
  })

  try {
    await program.parseAsync(argv, { from: 'user' })
    return code
  } catch (err) {
    if (err instanceof CommanderError) {
      return err.code === 'commander.helpDisplayed' || err.code === 'commander.version' || err.code === 'commander.help' ? 0 : 2
    }
    if (err instanceof UsageError) {
      io.err(`ducky: ${err.message}`)
      return 2
    }
    if (err instanceof RpcError && err.code === 'INVALID_ARGUMENT') {
      io.err(`ducky: ${err.message}`)
      return 2
    }
    throw err
  }
}
