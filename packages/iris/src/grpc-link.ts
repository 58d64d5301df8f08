/** @module A worker's link to a controller over gRPC. */
import { connect, type ClientTlsOptions } from '@marin/ducky'
import type { ControllerLink } from './controller-link.js'
import { ControllerService, fromRpc } from './controller-service.js'

/** Strips an optional scheme: `http://h:p`, `grpc://h:p` and `h:p` all name the same controller. */
export function normalizeAddress(address: string): string {
  return address.replace(/^[a-z]+:\/\//i, '').replace(/\/+$/, '')
}

export function grpcLink(
  address: string,
  opts: { token?: string; tls?: ClientTlsOptions; deadlineMs?: number } = {},
): ControllerLink & { close(): void } {
  const target = normalizeAddress(address)
  const client = connect(ControllerService, target, {
    ...(opts.token ? { token: opts.token } : {}),
    ...(opts.tls ? { tls: opts.tls } : {}),
    deadlineMs: opts.deadlineMs ?? 15_000,
    // The worker has its own retry loop; one quick retry smooths over a reconnect.
    retry: { maxAttempts: 2, initialMs: 50, maxMs: 200 },
  })
  const wrap = <T>(p: Promise<T>) => p.catch((e: unknown) => Promise.reject(fromRpc(e, target)))
  return {
    register: (req) => wrap(client.register(req)),
    heartbeat: (req, signal) =>
      wrap(client.heartbeat(req, { deadlineMs: req.waitMs + 10_000, ...(signal ? { signal } : {}) })),
    report: (req) => wrap(client.report(req)),
    close: () => client.close(),
  }
}
