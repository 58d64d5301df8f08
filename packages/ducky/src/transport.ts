/** @module Connection settings shared by servers and clients: keepalive, message size limits, TLS files. */
import { readFileSync } from 'node:fs'
import type { ChannelCredentials, ChannelOptions, ServerCredentials } from '@grpc/grpc-js'
import { RpcError } from './errors.js'
import { grpcJs } from './grpc-js.js'
import { DEFAULT_MAX_MESSAGE_BYTES, type MethodDef, type ServiceDef } from './service.js'

export type KeepaliveOptions = {
  /** Ping the peer after this long without activity, in ms. @default 30000 */
  timeMs?: number
  /** Drop the connection if a ping is not answered within this, in ms. @default 10000 */
  timeoutMs?: number
  /** Ping even when no call is open. @default true */
  permitWithoutCalls?: boolean
}

export type TransportOptions = {
  keepalive?: KeepaliveOptions
}

/** The largest messages one end sends and receives: grpc-js takes them per channel or server. */
export type MessageLimits = { sendBytes: number; receiveBytes: number }

/**
 * A server's channel-wide limits: the largest of its methods' (per-method limits are enforced
 * on each call, see call-gate.ts).
 */
export function serverLimits(methods: Iterable<MethodDef>): MessageLimits {
  let sendBytes = DEFAULT_MAX_MESSAGE_BYTES
  let receiveBytes = DEFAULT_MAX_MESSAGE_BYTES
  for (const m of methods) {
    sendBytes = Math.max(sendBytes, m.maxResponseBytes)
    receiveBytes = Math.max(receiveBytes, m.maxRequestBytes)
  }
  return { sendBytes, receiveBytes }
}

/** A client's limits for one service: it sends requests and receives responses. */
export function clientLimits(def: ServiceDef): MessageLimits {
  const { sendBytes, receiveBytes } = serverLimits(Object.values(def.methods))
  return { sendBytes: receiveBytes, receiveBytes: sendBytes }
}

/** The grpc-js channel/server options for these settings. */
export function grpcOptions(opts: TransportOptions, limits: MessageLimits): ChannelOptions {
  const ka = opts.keepalive ?? {}
  return {
    'grpc.max_send_message_length': limits.sendBytes,
    'grpc.max_receive_message_length': limits.receiveBytes,
    'grpc.keepalive_time_ms': ka.timeMs ?? 30_000,
    'grpc.keepalive_timeout_ms': ka.timeoutMs ?? 10_000,
    'grpc.keepalive_permit_without_calls': (ka.permitWithoutCalls ?? true) ? 1 : 0,
  }
}

/** TLS for a server: PEM files of its certificate chain and private key. */
export type ServerTlsOptions = { certFile: string; keyFile: string }

/** TLS for a client: the CA that signed the server's certificate (system roots if omitted). */
export type ClientTlsOptions = {
  /** PEM file of the trusted CA or of the server's self-signed certificate. */
  caFile?: string
  /** Name to verify the certificate against instead of the address's host. */
  serverName?: string
}

function readPem(path: string, field: string): Buffer {
  try {
    return readFileSync(path)
  } catch (err) {
    throw new RpcError(
      'INVALID_ARGUMENT',
      `${field}: cannot read ${path} (` +
        `${(err as NodeJS.ErrnoException).code ?? err}); pass the path ` +
        `of a readable PEM file`,
      { cause: err },
    )
  }
}

export function serverCredentials(tls: ServerTlsOptions | undefined): ServerCredentials {
  const { ServerCredentials } = grpcJs()
  if (tls === undefined) return ServerCredentials.createInsecure()
  return ServerCredentials.createSsl(
    null,
    [{ cert_chain: readPem(tls.certFile, 'tls.certFile'), private_key: readPem(tls.keyFile, 'tls.keyFile') }],
    false,
  )
}

export function clientCredentials(tls: ClientTlsOptions | true | undefined): {
  creds: ChannelCredentials
  options: ChannelOptions
} {
  const { credentials } = grpcJs()
  if (tls === undefined) return { creds: credentials.createInsecure(), options: {} }
  const opts = tls === true ? {} : tls
  const ca = opts.caFile === undefined ? null : readPem(opts.caFile, 'tls.caFile')
  return {
    creds: credentials.createSsl(ca),
    options: opts.serverName
      ? { 'grpc.ssl_target_name_override': opts.serverName, 'grpc.default_authority': opts.serverName }
      : {},
  }
}
