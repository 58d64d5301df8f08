/** @module @marin/ducky: typed RPC over gRPC: zod-validated service definitions, deadlines, retries, bearer auth,
 * streaming and TCP tunnels. */
import pkg from '../package.json' with { type: 'json' }

export const name: string = pkg.name
export const version: string = pkg.version

export {
  bidi,
  DEFAULT_MAX_MESSAGE_BYTES,
  defineService,
  METHOD_KINDS,
  methodPath,
  serverStream,
  unary,
} from './service.js'
export type { MethodDef, MethodKind, MethodOptions, Methods, ServiceDef } from './service.js'
export { bind } from './handlers.js'
export type {
  BidiHandler,
  CallContext,
  HandlerOf,
  ServerStreamHandler,
  ServiceBinding,
  ServiceImpl,
  UnaryHandler,
} from './handlers.js'
export { serve } from './server.js'
export type { DuckyServer, ServeOptions, ShutdownOptions } from './server.js'
export type { Authorize } from './call-gate.js'
export { connect } from './client.js'
export type { CallOptions, ClientMethodOf, ConnectOptions, DuckyClient, ResponseStream } from './client.js'
export { grpcStatus, isRpcError, RPC_CODES, RpcError, rpcCodeOf } from './errors.js'
export type { RpcCode, RpcErrorOptions } from './errors.js'
export type { SecretGetter, TokenSource } from './auth.js'
export { backoffMs, DEFAULT_RETRY } from './retry-policy.js'
export type { RetryOptions } from './retry-policy.js'
export type { ClientTlsOptions, KeepaliveOptions, ServerTlsOptions, TransportOptions } from './transport.js'
export { HEALTH_SERVICE, HealthStatus, SERVING_STATUSES } from './health.js'
export { checkHealth } from './health-check.js'
export type { HealthCheckOptions } from './health-check.js'
export type { ServingStatus } from './health.js'
export { decodeMessage, encodeMessage } from './wire.js'
export type { DuckyLogger } from './log.js'
export { openTunnel, tunnelService, TunnelService } from './tunnel.js'
export type { OpenTunnelOptions, Tunnel, TunnelServiceOptions } from './tunnel.js'
export { runCli } from './cli.js'
export type { CliIo } from './cli.js'
