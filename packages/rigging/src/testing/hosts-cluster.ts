/**
 * @module A cluster on test hosts (`net-hosts.ts`), as the tests across network hosts use it: host A runs the
 * object store (s3rver, bucket `marin-test`, objects in A's folder) and an iris controller; each other host runs
 * one iris worker (`wb` on B, `wc` on C, …) registered with it. Hosts share only the store and the controller:
 * each process gets its host's own folder as `MARIN_PREFIX` and reaches the store through the S3 SDK's environment
 * (`env(host)`). The iris command is given by the caller (iris ranks above rigging; nothing here imports it).
 * `drive` runs a driver script on a host to its one `{"step":"done"}` line. `close()` removes everything.
 *
 * @example
 * const cluster = await startHostsCluster({ irisBin: IRIS_BIN, token: 'a-token-of-16-chars+' })
 * afterAll(() => cluster.close())
 * const done = await cluster.drive<Done>(cluster.a, ['--import', TSX, DRIVER, JSON.stringify(config)])
 */
import { spawn } from 'node:child_process'
import { join, resolve } from 'node:path'
import { type HostProcess, machineSlowdown, makeNetHosts, type NetHost, type NetHosts } from './net-hosts.js'

/** The object store's script (`node S3_HOST_SCRIPT ADDRESS DIR`): s3rver with the bucket `marin-test`. */
export const S3_HOST_SCRIPT = resolve(import.meta.dirname, 'fixtures', 's3-host.mjs')
const CONTROLLER_PORT = 10_000

/** The S3 SDK's environment for the store at `endpoint` (s3rver's fixed credentials). */
export function s3Env(endpoint: string): Record<string, string> {
  return {
    AWS_ENDPOINT_URL: endpoint,
    AWS_ACCESS_KEY_ID: 'S3RVER',
    AWS_SECRET_ACCESS_KEY: 'S3RVER',
    AWS_REGION: 'us-east-1',
    // s3rver predates the SDK's default CRC checksums (aws-chunked uploads).
    AWS_REQUEST_CHECKSUM_CALCULATION: 'WHEN_REQUIRED',
    AWS_RESPONSE_CHECKSUM_VALIDATION: 'WHEN_REQUIRED',
  }
}

/**
 * The object store on loopback, in a process of its own (tests on one host): objects under `dir`. `close()` kills
 * it; it dies with this process too.
 */
export function startLoopbackS3(
  dir: string,
  timeoutMs = 20_000 * machineSlowdown(),
): Promise<{ endpoint: string; env: Record<string, string>; close(): void }> {
  const p = spawn(process.execPath, [S3_HOST_SCRIPT, '127.0.0.1', dir], { stdio: ['ignore', 'pipe', 'pipe'] })
  const close = () => void p.kill('SIGKILL')
  process.once('exit', close)
  let out = ''
  let err = ''
  p.stderr.on('data', (d) => (err += d))
  return new Promise((ok, fail) => {
    const failed = (why: string) => {
      close()
      fail(new Error(`s3 server ${why}; stderr: ${err.slice(-1500)}`))
    }
    const timer = setTimeout(() => failed(`did not start within ${timeoutMs} ms`), timeoutMs)
    p.on('exit', (code) => failed(`exited (${code})`))
    p.stdout.on('data', (d) => {
      out += d
      const m = /^\{"listening".*$/m.exec(out)
      if (!m) return
      clearTimeout(timer)
      const endpoint = (JSON.parse(m[0]) as { listening: string }).listening
      ok({ endpoint, env: s3Env(endpoint), close })
    })
  })
}

export type HostsClusterOptions = {
  /** Path of the iris command (`packages/iris/bin/iris.js`), run with this Node. */
  readonly irisBin: string
  /** The cluster's token (`IRIS_TOKEN` of every process). */
  readonly token: string
  /** Worker hosts after A. @default 2 */
  readonly workers?: number
  /** Each worker's `--resources`. @default 'cpu=1,memory=4G' */
  readonly workerResources?: string
  /** The controller's `--heartbeat`. @default '500ms' */
  readonly heartbeat?: string
  /** The controller's `--worker-timeout` (how long a silent worker stays alive). @default iris's */
  readonly workerTimeout?: string
  /**
   * Longest wait for the store, the controller and each worker to come up (each in turn; the workers at once).
   * @default 20000 times `machineSlowdown()` when the cluster starts
   */
  readonly startTimeoutMs?: number
  /** Added to the environment of every process (`env(host)`), e.g. a test's `FRAY_PEER_TIMEOUT_MS`. */
  readonly env?: Record<string, string>
}

export type ClusterWorker = { readonly id: string; readonly host: NetHost; process: HostProcess }

export type HostsCluster = {
  readonly net: NetHosts
  /** Host A: the store and the controller. */
  readonly a: NetHost
  /** The worker hosts, B, C, … in order. */
  readonly workers: readonly ClusterWorker[]
  /** The store's endpoint, `http://<A>:<port>`. */
  readonly s3: string
  /** The controller, `<A>:10000`. */
  readonly controller: string
  readonly token: string
  /**
   * The environment of a process on `h`: its own `MARIN_PREFIX`, the token, the store's S3 settings, JSON logs and
   * the options' `env`.
   */
  env(h: NetHost): Record<string, string>
  /** Starts the worker of `w` again (after it was killed); resolves once it registered. */
  restartWorker(w: ClusterWorker): Promise<void>
  /**
   * Runs `node argv` on `h` until it prints a `{"step":"done", …}` line (resolved with it, parsed) or a
   * `{"step":"error","message"}` line (thrown, with the driver's stderr). @default timeoutMs 50000 times
   * `machineSlowdown()`
   */
  drive<T>(h: NetHost, argv: readonly string[], opts?: { timeoutMs?: number }): Promise<T>
  /** Kills every process and removes the hosts. Idempotent. */
  close(): void
}

/** What `waitFor` rejected with, and the process's stderr (the useful part of a failure to start). */
const withStderr = (what: string, p: HostProcess) => (e: unknown) => {
  throw new Error(`${(e as Error)?.message ?? e}; ${what} stderr: ${p.stderr().slice(-1500)}`)
}

/** Makes hosts A and one per worker, and starts the store, the controller and the workers on them. */
export async function startHostsCluster(opts: HostsClusterOptions): Promise<HostsCluster> {
  const n = opts.workers ?? 2
  const startMs = opts.startTimeoutMs ?? 20_000 * machineSlowdown()
  const net = makeNetHosts(n + 1)
  try {
    const [a, ...rest] = net.hosts as [NetHost, ...NetHost[]]
    const store = a.spawn(process.execPath, [S3_HOST_SCRIPT, a.address, join(a.dir, 's3')])
    const up = await store.waitFor(/^\{"listening".*$/m, startMs).catch(withStderr('s3 server', store))
    const s3 = (JSON.parse(up[0]) as { listening: string }).listening
    const controller = `${a.address}:${CONTROLLER_PORT}`
    const env = (h: NetHost): Record<string, string> => ({
      MARIN_PREFIX: join(h.dir, '.marin'),
      IRIS_TOKEN: opts.token,
      LOG_FORMAT: 'json',
      LOG_LEVEL: 'warn',
      ...s3Env(s3),
      ...opts.env,
    })
    const ctlArgs = ['controller', '--host', a.address, '--port', String(CONTROLLER_PORT)]
    ctlArgs.push('--heartbeat', opts.heartbeat ?? '500ms')
    if (opts.workerTimeout) ctlArgs.push('--worker-timeout', opts.workerTimeout)
    const ctl = a.spawn(process.execPath, [opts.irisBin, ...ctlArgs], { env: env(a) })
    await ctl.waitFor(/listening on (\S+)/, startMs).catch(withStderr('controller', ctl))

    const startWorker = async (host: NetHost, id: string): Promise<HostProcess> => {
      const resources = opts.workerResources ?? 'cpu=1,memory=4G'
      const args = [opts.irisBin, 'worker', '--controller', controller, '--worker-id', id, '--resources', resources]
      const p = host.spawn(process.execPath, args, { env: env(host) })
      await p.waitFor(/registered with/, startMs).catch(withStderr(`worker ${id}`, p))
      return p
    }
    const ids = rest.map((_, i) => `w${String.fromCharCode(98 + i)}`)
    const procs = await Promise.all(rest.map((h, i) => startWorker(h, ids[i]!)))
    const workers: ClusterWorker[] = rest.map((host, i) => ({ id: ids[i]!, host, process: procs[i]! }))

    return {
      net,
      a,
      workers,
      s3,
      controller,
      token: opts.token,
      env,
      async restartWorker(w) {
        w.process.kill('SIGKILL')
        await w.process.exited
        w.process = await startWorker(w.host, w.id)
      },
      async drive<T>(h: NetHost, argv: readonly string[], o: { timeoutMs?: number } = {}): Promise<T> {
        const p = h.spawn(process.execPath, argv, { env: env(h) })
        const m = await p
          .waitFor(/^\{"step":"(done|error)".*$/m, o.timeoutMs ?? 50_000 * machineSlowdown())
          .catch(withStderr(`driver on ${h.address}`, p))
        const s = JSON.parse(m[0]) as { step: string; message?: string }
        if (s.step === 'error') throw new Error(`driver failed: ${s.message}; stderr: ${p.stderr().slice(-2000)}`)
        return s as T
      },
      close: () => net.close(),
    }
  } catch (err) {
    net.close()
    throw err
  }
}
