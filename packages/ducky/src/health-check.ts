/** @module A client for the standard health service: is a ducky (or any gRPC) server serving? */
import { fromServiceError } from './errors.js'
import { grpcJs } from './grpc-js.js'
import { decodeHealthResponse, encodeHealthRequest, HEALTH_SERVICE, type ServingStatus } from './health.js'
import { clientCredentials, type ClientTlsOptions } from './transport.js'

export type HealthCheckOptions = {
  /** Service to ask about; '' asks about the server as a whole. @default '' */
  service?: string
  tls?: ClientTlsOptions | true
  /** @default 5000 */
  timeoutMs?: number
}

/**
 * Calls `grpc.health.v1.Health/Check` on `address`. Rejects with an RpcError (UNAVAILABLE when
 * nothing answers, NOT_FOUND for an unknown service).
 * @example
 * if ((await checkHealth('127.0.0.1:7070')) !== 'SERVING') process.exit(1)
 */
export async function checkHealth(address: string, opts: HealthCheckOptions = {}): Promise<ServingStatus> {
  const { creds, options } = clientCredentials(opts.tls)
  const { Client, Metadata } = grpcJs()
  const client = new Client(address, creds, options)
  const method = `/${HEALTH_SERVICE}/Check`
  try {
    return await new Promise<ServingStatus>((resolve, reject) =>
      client.makeUnaryRequest(
        method,
        encodeHealthRequest,
        decodeHealthResponse,
        opts.service ?? '',
        new Metadata(),
        { deadline: Date.now() + (opts.timeoutMs ?? 5000) },
        (err, res) => (err ? reject(fromServiceError(err, method)) : resolve(res!)),
      ),
    )
  } finally {
    client.close()
  }
}
