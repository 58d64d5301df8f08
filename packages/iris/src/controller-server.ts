/** @module A controller on gRPC: the state, the scheduler and the ducky server in one object. */
import { RpcError, serve, type CallContext, type DuckyServer, type ServerTlsOptions } from '@marin/ducky'
import { Controller, type ControllerOptions } from './controller.js'
import { ControllerService, controllerImpl } from './controller-service.js'
import { ClusterAuth } from './credentials.js'

export type ControllerServerOptions = ControllerOptions & {
  /** Interface to listen on. @default '127.0.0.1' */
  host?: string
  /** Port; 0 picks a free one. @default 0 */
  port?: number
  /**
   * The cluster token. When set, every call must carry it or a job token the controller
   * made from it (tasks get one for their own job); without it the API is open.
   */
  token?: string
  /** Serve TLS with these PEM files (certificate chain and private key). @default plaintext */
  tls?: ServerTlsOptions
  /**
   * The address workers and tasks should use to reach this controller (IRIS_CONTROLLER).
   * @default `<host>:<port>` as bound
   */
  advertise?: string
}

export type ControllerServer = {
  readonly controller: Controller
  readonly server: DuckyServer
  /** `host:port` for clients and workers. */
  readonly address: string
  /** Stops serving (in-flight calls get `graceMs`) and closes the state file. */
  close(opts?: { graceMs?: number }): Promise<void>
}

/** Refuses a call whose token is neither the cluster token nor a job token (UNAUTHENTICATED, as the methods would). */
function authenticated(auth: ClusterAuth, md: CallContext['metadata']): void {
  const p = auth.authenticate(md.get('authorization')[0])
  if ('refused' in p) throw new RpcError('UNAUTHENTICATED', p.refused)
}

/**
 * Opens the state, starts scheduling and serves the controller API.
 * @example
 * const { address, close } = await startController({ statePath: '.marin/iris/iris.sqlite', port: 10000 })
 */
export async function startController(opts: ControllerServerOptions): Promise<ControllerServer> {
  const auth = opts.token ? new ClusterAuth(opts.token) : undefined
  const controller = new Controller({ ...opts, ...(auth ? { jobToken: (jobId: string) => auth.jobToken(jobId) } : {}) })
  let server: DuckyServer
  try {
    // Auth is iris's own (cluster and job tokens): ducky's gate refuses a call without a token
    // iris accepts before reading its request; each method then checks what the caller may do.
    server = await serve(ControllerService, controllerImpl(controller, auth), {
      host: opts.host ?? '127.0.0.1',
      port: opts.port ?? 0,
      ...(opts.tls ? { tls: opts.tls } : {}),
      ...(auth ? { authorize: (md: CallContext['metadata']) => authenticated(auth, md) } : {}),
    })
  } catch (err) {
    controller.close()
    throw err
  }
  const address =
    opts.advertise ?? (server.host === '0.0.0.0' || server.host === '::' ? `127.0.0.1:${server.port}` : server.address)
  controller.address = address
  return {
    controller,
    server,
    address,
    async close(o = {}) {
      // Long-polling heartbeats would hold the grace period open: release them first.
      controller.close()
      await server.shutdown({ graceMs: o.graceMs ?? 1000 })
    },
  }
}
