import { expect, test } from 'vitest'

test('exports', async () => {
  expect(Object.keys(await import('./index.js')).sort()).toMatchInlineSnapshot(`
    [
      "DEFAULT_MAX_MESSAGE_BYTES",
      "DEFAULT_RETRY",
      "HEALTH_SERVICE",
      "HealthStatus",
      "METHOD_KINDS",
      "RPC_CODES",
      "RpcError",
      "SERVING_STATUSES",
      "TunnelService",
      "backoffMs",
      "bidi",
      "bind",
      "checkHealth",
      "connect",
      "decodeMessage",
      "defineService",
      "encodeMessage",
      "grpcStatus",
      "isRpcError",
      "methodPath",
      "name",
      "openTunnel",
      "rpcCodeOf",
      "runCli",
      "serve",
      "serverStream",
      "tunnelService",
      "unary",
      "version",
    ]
  `)
})
